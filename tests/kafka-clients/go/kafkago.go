// segmentio/kafka-go through the produce / group-consume scenario of
// tests/tests/kafka_clients_more.rs. kafka-go has no idempotent producer, so its
// Writer produces with acks=all only. Like the other clients' steps, the producer
// reports where each record landed (the Writer's Completion callback) and the
// consumer each record it read and the group's committed offsets (OffsetFetch through
// kafka.Client once the reader has left). kafka-go does not expose a record's
// timestamp type, so only the timestamp is reported.
//
//	go run . kafkago-produce BOOTSTRAP TOPIC FROM COUNT
//	go run . kafkago-consume BOOTSTRAP TOPIC GROUP COUNT
package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

func kafkagoProduce(ctx context.Context, bootstrap, topic string, from, count int) (map[string]any, error) {
	var mu sync.Mutex
	placed := map[string][2]int64{}
	w := &kafka.Writer{
		// Called with each partition's batch once the broker answered, offsets set.
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				placed[string(m.Key)] = [2]int64{int64(m.Partition), m.Offset}
			}
		},
		Addr:         kafka.TCP(bootstrap),
		Topic:        topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     &kafka.Hash{},
		BatchTimeout: 10 * time.Millisecond,
		MaxAttempts:  5,
	}
	msgs := make([]kafka.Message, 0, count)
	for i := from; i < from+count; i++ {
		msgs = append(msgs, kafka.Message{
			Key:     []byte(fmt.Sprintf("k%d", i)),
			Value:   []byte(fmt.Sprintf("v%d", i)),
			Headers: []kafka.Header{{Key: "seq", Value: []byte(fmt.Sprint(i))}},
		})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close writer: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	records := []map[string]any{}
	for _, m := range msgs {
		at, ok := placed[string(m.Key)]
		if !ok {
			return nil, fmt.Errorf("no completion for %s", m.Key)
		}
		records = append(records, map[string]any{"key": string(m.Key), "partition": at[0], "offset": at[1]})
	}
	return map[string]any{"produced": count, "idempotent": false, "records": records}, nil
}

func kafkagoConsume(ctx context.Context, bootstrap, topic, group string, count int) (map[string]any, error) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     []string{bootstrap},
		GroupID:     group,
		Topic:       topic,
		StartOffset: kafka.FirstOffset,
		MaxWait:     200 * time.Millisecond,
		// Commits only when asked (CommitMessages), synchronously.
		CommitInterval: 0,
	})
	var values []string
	var records []map[string]any
	var read []kafka.Message
	for len(values) < count {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("fetch after %d records: %w", len(values), err)
		}
		values = append(values, string(m.Value))
		var headers [][]any
		for _, h := range m.Headers {
			headers = append(headers, []any{h.Key, text(h.Value)})
		}
		records = append(records, map[string]any{
			"partition": m.Partition, "offset": m.Offset, "key": text(m.Key), "value": text(m.Value),
			"headers": headers, "timestamp": m.Time.UnixMilli(),
		})
		read = append(read, m)
	}
	if err := r.CommitMessages(ctx, read...); err != nil {
		r.Close()
		return nil, fmt.Errorf("commit: %w", err)
	}
	if err := r.Close(); err != nil {
		return nil, fmt.Errorf("close reader: %w", err)
	}
	offsets, err := kafkagoCommitted(ctx, bootstrap, topic, group)
	if err != nil {
		return nil, err
	}
	return map[string]any{"values": values, "records": records, "committed": offsets}, nil
}

// kafkagoCommitted is the group's committed offset of each of the topic's partitions
// (-1: none), as OffsetFetch through kafka.Client answers.
func kafkagoCommitted(ctx context.Context, bootstrap, topic, group string) ([]map[string]any, error) {
	c := &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 30 * time.Second}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var partitions []int
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			partitions = append(partitions, p.ID)
		}
	}
	sort.Ints(partitions)
	res, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: partitions}})
	if err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("offset fetch: %w", res.Error)
	}
	var out []map[string]any
	for _, p := range res.Topics[topic] {
		entry := map[string]any{"partition": p.Partition, "offset": p.CommittedOffset}
		if p.Error != nil {
			entry["error"] = p.Error.Error()
		}
		out = append(out, entry)
	}
	return out, nil
}
