// Sarama (IBM/sarama) through the produce / group-consume scenario that
// tests/tests/kafka_clients_more.rs runs for every client: an idempotent producer
// (acks=all) writes records kFROM.. (value vFROM.., header seq=FROM..) and reports
// where each landed; a consumer group member reads COUNT records, commits them and
// leaves, so the next member of the group resumes after them, and reports each record
// it read and the group's committed offsets as the cluster admin then fetches them.
// Sarama does not expose a record's timestamp type, so only the timestamp is reported.
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
	var records []map[string]any
	for i := from; i < from+count; i++ {
		key := fmt.Sprintf("k%d", i)
		msg := &sarama.ProducerMessage{
			Topic:   topic,
			Key:     sarama.StringEncoder(key),
			Value:   sarama.StringEncoder(fmt.Sprintf("v%d", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("seq"), Value: []byte(fmt.Sprint(i))}},
		}
		partition, off, err := p.SendMessage(msg)
		if err != nil {
			return nil, fmt.Errorf("send v%d: %w", i, err)
		}
		records = append(records, map[string]any{"key": key, "partition": partition, "offset": off})
	}
	return map[string]any{"produced": count, "idempotent": true, "records": records}, nil
}

// saramaHandler collects records until it has want of them, marking each, then
// commits synchronously and ends the session. Each partition's claim runs on a
// goroutine of its own, hence the lock, which also covers the mark: the record that
// completes the set is marked after every other one, so the commit covers them all.
type saramaHandler struct {
	want    int
	mu      sync.Mutex
	values  []string
	records []map[string]any
	once    sync.Once
	done    chan struct{}
}

// take records and marks one record; true once want are in.
func (h *saramaHandler) take(s sarama.ConsumerGroupSession, m *sarama.ConsumerMessage) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.values) < h.want {
		h.values = append(h.values, string(m.Value))
		var headers [][]any
		for _, hd := range m.Headers {
			headers = append(headers, []any{string(hd.Key), text(hd.Value)})
		}
		h.records = append(h.records, map[string]any{
			"partition": m.Partition, "offset": m.Offset, "key": text(m.Key), "value": text(m.Value),
			"headers": headers, "timestamp": m.Timestamp.UnixMilli(),
		})
		s.MarkMessage(m, "")
	}
	return len(h.values) >= h.want
}

// text is a key, value or header value as a string, or nil for a null one.
func text(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
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
			if h.take(s, m) {
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
	offsets, err := saramaCommitted(bootstrap, topic, group)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return map[string]any{"values": h.values, "records": h.records, "committed": offsets}, nil
}

// saramaCommitted is the group's committed offset of each of the topic's partitions
// (-1: none), as OffsetFetch through the cluster admin answers once the member has left.
func saramaCommitted(bootstrap, topic, group string) ([]map[string]any, error) {
	client, err := sarama.NewClient([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("new admin: %w", err)
	}
	defer admin.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	res, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: partitions})
	if err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	var out []map[string]any
	for _, p := range partitions {
		entry := map[string]any{"partition": p, "offset": int64(-1)}
		if b := res.GetBlock(topic, p); b != nil {
			entry["offset"] = b.Offset
			if b.Err != sarama.ErrNoError {
				entry["error"] = b.Err.Error()
			}
		}
		out = append(out, entry)
	}
	if res.Err != sarama.ErrNoError {
		return nil, fmt.Errorf("offset fetch: %w", res.Err)
	}
	return out, nil
}
