// Package suites exists so that this module requires the clients whose own test
// suites tests/tests/kafka_client_suites.rs runs against es (`go test
// github.com/twmb/franz-go/pkg/kgo` from here); it holds no code of its own.
package suites

import _ "github.com/twmb/franz-go/pkg/kgo"
