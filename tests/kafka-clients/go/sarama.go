// Sarama (IBM/sarama) through the produce / group-consume scenario that
// tests/tests/kafka_clients_more.rs runs for every client: an idempotent producer
// (acks=all) writes records kFROM..; a consumer group member reads COUNT records,
// commits them and leaves, so the next member of the group resumes after them.
//
//	go run . sarama-produce BOOTSTRAP TOPIC FROM COUNT
//	go run . sarama-consume BOOTSTRAP TOPIC GROUP COUNT
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	// Sarama's own default, pinned: the release it has full protocol coverage for.
	c.Version = sarama.V2_8_0_0
	c.ClientID = "es-sarama"
	c.Net.DialTimeout = 10 * time.Second
	c.Metadata.Timeout = 30 * time.Second
	return c
}

func saramaProduce(bootstrap, topic string, from, count int) (map[string]any, error) {
	c := saramaConfig()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 5
	c.Net.MaxOpenRequests = 1
	c.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer([]string{bootstrap}, c)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	defer p.Close()
	var offsets []int64
	for i := from; i < from+count; i++ {
		msg := &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("v%d", i)),
		}
		_, off, err := p.SendMessage(msg)
		if err != nil {
			return nil, fmt.Errorf("send v%d: %w", i, err)
		}
		offsets = append(offsets, off)
	}
	return map[string]any{"produced": count, "idempotent": true, "offsets": offsets}, nil
}

// saramaHandler collects records until it has want of them, marking each, then
// commits synchronously and ends the session. Each partition's claim runs on a
// goroutine of its own, hence the lock.
type saramaHandler struct {
	want   int
	mu     sync.Mutex
	values []string
	once   sync.Once
	done   chan struct{}
}

// take records one value; true once want are in.
func (h *saramaHandler) take(v string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.values) < h.want {
		h.values = append(h.values, v)
	}
	return len(h.values) >= h.want
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			full := h.take(string(m.Value))
			s.MarkMessage(m, "")
			if full {
				s.Commit()
				h.once.Do(func() { close(h.done) })
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func saramaConsume(ctx context.Context, bootstrap, topic, group string, count int) (map[string]any, error) {
	c := saramaConfig()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, c)
	if err != nil {
		return nil, fmt.Errorf("new consumer group: %w", err)
	}
	h := &saramaHandler{want: count, done: make(chan struct{})}
	run, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, 1)
	go func() {
		// Consume returns at every rebalance; join again until done.
		for run.Err() == nil {
			if err := g.Consume(run, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				errs <- err
				return
			}
		}
	}()
	select {
	case <-h.done:
	case err := <-errs:
		return nil, fmt.Errorf("consume: %w", err)
	case <-ctx.Done():
		return nil, fmt.Errorf("read fewer than %d records: %w", count, ctx.Err())
	}
	stop()
	if err := g.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return map[string]any{"values": h.values}, nil
}
