// The produce / group-consume scenario of Sarama and kafka-go, parsed here from the
// command line (see sarama.go and kafkago.go).
package main

import (
	"context"
	"fmt"
	"strconv"
)

func resume(ctx context.Context, scenario string, args []string) (map[string]any, error) {
	if len(args) < 4 {
		return nil, fmt.Errorf("%s needs BOOTSTRAP TOPIC and two more arguments", scenario)
	}
	bootstrap, topic := args[0], args[1]
	count, err := strconv.Atoi(args[3])
	if err != nil {
		return nil, fmt.Errorf("COUNT %q: %w", args[3], err)
	}
	if scenario == "sarama-consume" {
		return saramaConsume(ctx, bootstrap, topic, args[2], count)
	}
	if scenario == "kafkago-consume" {
		return kafkagoConsume(ctx, bootstrap, topic, args[2], count)
	}
	from, err := strconv.Atoi(args[2])
	if err != nil {
		return nil, fmt.Errorf("FROM %q: %w", args[2], err)
	}
	if scenario == "sarama-produce" {
		return saramaProduce(bootstrap, topic, from, count)
	}
	return kafkagoProduce(ctx, bootstrap, topic, from, count)
}
