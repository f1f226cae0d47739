// Command capture sends the records of records.tsv to partition 0 of one topic as a
// single batch with franz-go, so the broker's segment file holds exactly the batch this
// client encoded.
//
// usage: capture BOOTSTRAP TOPIC CODEC IDEMPOTENT RECORDS_TSV
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// field decodes "-" as nil (null), "." as empty, anything else as hex.
func field(s string) []byte {
	switch s {
	case "-":
		return nil
	case ".":
		return []byte{}
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func parse(topic, line string) *kgo.Record {
	cols := strings.Split(line, "\t")
	ts, err := strconv.ParseInt(cols[0], 10, 64)
	if err != nil {
		panic(err)
	}
	r := &kgo.Record{Topic: topic, Partition: 0, Key: field(cols[1]), Value: field(cols[2]), Timestamp: time.UnixMilli(ts)}
	if cols[3] != "." {
		for _, pair := range strings.Split(cols[3], ",") {
			kv := strings.SplitN(pair, ":", 2)
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(field(kv[0])), Value: field(kv[1])})
		}
	}
	return r
}

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "none":
		return kgo.NoCompression()
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	panic("unknown codec " + name)
}

func main() {
	bootstrap, topic, idempotent, path := os.Args[1], os.Args[2], os.Args[4] == "true", os.Args[5]
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec(os.Args[3])),
		// One batch: nothing leaves before Flush, and the batch has room for all records.
		kgo.ProducerLinger(30 * time.Second),
		kgo.ProducerBatchMaxBytes(1 << 20),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	file, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer file.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	count := 0
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		wg.Add(1)
		count++
		client.Produce(ctx, parse(topic, line), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		})
	}
	if err := client.Flush(ctx); err != nil {
		panic(err)
	}
	wg.Wait()
	if len(failures) > 0 {
		panic(fmt.Sprint(failures))
	}
	fmt.Printf("%s: %d records (franz-go %s)\n", topic, count, franzVersion())
}

// franzVersion is the franz-go module version this binary was built with.
func franzVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/twmb/franz-go" {
				return dep.Version
			}
		}
	}
	return "unknown"
}
