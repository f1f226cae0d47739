// segmentio/kafka-go through the produce / group-consume scenario of
// tests/tests/kafka_clients_more.rs. kafka-go has no idempotent producer, so its
// Writer produces with acks=all only.
//
//	go run . kafkago-produce BOOTSTRAP TOPIC FROM COUNT
//	go run . kafkago-consume BOOTSTRAP TOPIC GROUP COUNT
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

func kafkagoProduce(ctx context.Context, bootstrap, topic string, from, count int) (map[string]any, error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(bootstrap),
		Topic:        topic,
		RequiredAcks: kafka.RequireAll,
		Balancer:     &kafka.Hash{},
		BatchTimeout: 10 * time.Millisecond,
		MaxAttempts:  5,
	}
	msgs := make([]kafka.Message, 0, count)
	for i := from; i < from+count; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close writer: %w", err)
	}
	return map[string]any{"produced": count, "idempotent": false}, nil
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
	var read []kafka.Message
	for len(values) < count {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("fetch after %d records: %w", len(values), err)
		}
		values = append(values, string(m.Value))
		read = append(read, m)
	}
	if err := r.CommitMessages(ctx, read...); err != nil {
		r.Close()
		return nil, fmt.Errorf("commit: %w", err)
	}
	if err := r.Close(); err != nil {
		return nil, fmt.Errorf("close reader: %w", err)
	}
	return map[string]any{"values": values}, nil
}
