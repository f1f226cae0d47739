// franz-go (kgo + kadm) through es's Kafka scenarios, as the Java client does
// (tests/kafka-clients/java): each scenario prints one flat JSON document of what the
// client observed, so tests/tests/kafka_clients.rs can check it against es and compare
// it with what the same scenario observed on Apache Kafka.
//
//	go run . roundtrip BOOTSTRAP TOPIC CODEC
//	go run . group BOOTSTRAP TOPIC
//	go run . sarama-produce|kafkago-produce BOOTSTRAP TOPIC FROM COUNT
//	go run . sarama-consume|kafkago-consume BOOTSTRAP TOPIC GROUP COUNT
//
// Every wait is bounded; a scenario that cannot finish exits non-zero with the reason.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const fixedTS = int64(1_700_000_000_000)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: roundtrip BOOTSTRAP TOPIC CODEC | group BOOTSTRAP TOPIC | "+
			"{sarama,kafkago}-produce BOOTSTRAP TOPIC FROM COUNT | {sarama,kafkago}-consume BOOTSTRAP TOPIC GROUP COUNT")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out map[string]any
	var err error
	switch os.Args[1] {
	case "roundtrip":
		codec := "none"
		if len(os.Args) > 4 {
			codec = os.Args[4]
		}
		out, err = roundtrip(ctx, os.Args[2], os.Args[3], codec)
	case "group":
		out, err = group(ctx, os.Args[2], os.Args[3])
	case "sarama-produce", "sarama-consume", "kafkago-produce", "kafkago-consume":
		out, err = resume(ctx, os.Args[1], os.Args[2:])
	default:
		err = fmt.Errorf("unknown scenario %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenario failed:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func codecOf(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	default:
		return kgo.NoCompression()
	}
}

// records are the round trip's fixed records, all to partition 0 so their order is fixed.
func records(topic string) []*kgo.Record {
	png := make([]byte, 300)
	copy(png, []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'})
	for i := 8; i < len(png); i++ {
		png[i] = byte(i*31 + 7)
	}
	return []*kgo.Record{
		{Topic: topic, Key: []byte{0, 10, 0xff}, Value: []byte("hello"), Headers: []kgo.RecordHeader{
			{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "b", Value: nil}}},
		{Topic: topic, Key: nil, Value: []byte{}},
		{Topic: topic, Key: []byte("tombstone"), Value: nil},
		{Topic: topic, Key: []byte("utf8"), Value: []byte{0xc3, 0x28, 0xa0}, Timestamp: time.UnixMilli(fixedTS)},
		{Topic: topic, Key: []byte("png"), Value: png, Timestamp: time.UnixMilli(fixedTS + 5)},
	}
}

func b64(v []byte) string {
	if v == nil {
		return "null"
	}
	return "'" + base64.StdEncoding.EncodeToString(v) + "'"
}

func line(r *kgo.Record) string {
	var b strings.Builder
	b.WriteString(b64(r.Key) + "/" + b64(r.Value) + "/")
	for _, h := range r.Headers {
		b.WriteString(h.Key + "=" + b64(h.Value) + ";")
	}
	if ms := r.Timestamp.UnixMilli(); ms >= fixedTS && ms < fixedTS+1000 {
		fmt.Fprintf(&b, "/ts=%d", ms)
	}
	return b.String()
}

func roundtrip(ctx context.Context, bootstrap, topic, codec string) (map[string]any, error) {
	out := map[string]any{}
	admin, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	out["partitions_created"] = partitions(ctx, adm, topic, 3)
	if _, err := adm.UpdatePartitions(ctx, 4, topic); err != nil {
		return nil, fmt.Errorf("add partitions: %w", err)
	}
	out["partitions_after_increase"] = partitions(ctx, adm, topic, 4)
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out["listed"] = listed.Has(topic)

	// Idempotent by default (franz-go), acks=all; records go where their Partition says.
	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ProducerBatchCompression(codecOf(codec)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(4_000_000),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	sent := records(topic)
	var placed []string
	for _, r := range producer.ProduceSync(ctx, sent...) {
		if r.Err != nil {
			return nil, fmt.Errorf("produce: %w", r.Err)
		}
		placed = append(placed, fmt.Sprintf("%d@%d", r.Record.Partition, r.Record.Offset))
	}
	out["placed"] = strings.Join(placed, ",")
	big := make([]byte, 1_100_000)
	rand.New(rand.NewSource(42)).Read(big)
	res := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: big})
	out["oversized_error"] = errorName(res[0].Err)
	producer.Close()

	keyedClient, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, err
	}
	var keyed []string
	for i := 0; i < 12; i++ {
		key := []byte(fmt.Sprintf("key-%d", i))
		r := keyedClient.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: key, Value: key})
		if r[0].Err != nil {
			return nil, r[0].Err
		}
		keyed = append(keyed, fmt.Sprint(r[0].Record.Partition))
	}
	keyedClient.Close()
	out["keyed_partitions"] = strings.Join(keyed, ",")

	consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < len(sent)+4 && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := consumer.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
		if len(got) >= len(sent) {
			break
		}
	}
	var seen, expected []string
	for i, r := range got {
		if i < len(sent) {
			seen = append(seen, line(r))
		}
	}
	for _, r := range sent {
		expected = append(expected, line(r))
	}
	identical := strings.Join(seen, " | ") == strings.Join(expected, " | ")
	out["byte_identical"] = identical
	if !identical {
		out["seen"] = strings.Join(seen, " | ")
		out["expected"] = strings.Join(expected, " | ")
	}
	if len(got) > 0 {
		out["timestamp_type"] = timestampType(got[0])
		out["first_offset"] = got[0].Offset
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if o, ok := starts.Lookup(topic, 0); ok {
		out["beginning_offset"] = o.Offset
	}
	if o, ok := ends.Lookup(topic, 0); ok {
		out["end_offset"] = o.Offset
	}
	at, err := adm.ListOffsetsAfterMilli(ctx, fixedTS, topic)
	if err != nil {
		return nil, err
	}
	if o, ok := at.Lookup(topic, 0); ok {
		out["offset_for_fixed_timestamp"] = o.Offset
	}
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		return nil, fmt.Errorf("delete topic: %w", err)
	}
	out["deleted"] = gone(ctx, adm, topic)
	return out, nil
}

func timestampType(r *kgo.Record) string {
	if r.Attrs.TimestampType() == 1 {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// errorName is Kafka's name of a broker error code, or the client-side error.
func errorName(err error) string {
	if err == nil {
		return "accepted"
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func partitions(ctx context.Context, adm *kadm.Client, topic string, want int) int {
	n := -1
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		d, err := adm.ListTopics(ctx, topic)
		if err == nil && d.Has(topic) && d[topic].Err == nil {
			n = len(d[topic].Partitions)
			if n == want {
				return n
			}
		}
	}
	return n
}

func gone(ctx context.Context, adm *kadm.Client, topic string) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		d, err := adm.ListTopics(ctx)
		if err == nil && !d.Has(topic) {
			return true
		}
	}
	return false
}

// group: two members divide a 6-partition topic; nothing read twice or missed.
func group(ctx context.Context, bootstrap, topic string) (map[string]any, error) {
	out := map[string]any{}
	admin, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		return nil, err
	}
	partitions(ctx, adm, topic, 6)
	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	var rs []*kgo.Record
	for p := int32(0); p < 6; p++ {
		for i := 0; i < 10; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d:%d", p, i))})
		}
	}
	if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return nil, err
	}
	producer.Close()

	groupID := "g-" + topic
	var mu sync.Mutex
	seen := map[string]bool{}
	duplicates := 0
	assigned := map[string]map[int32]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, name := range []string{"m1", "m2"} {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			c, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
				mu.Lock()
				done := len(seen) >= 60
				mu.Unlock()
				if done {
					break
				}
				pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := c.PollFetches(pctx)
				pcancel()
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					if seen[string(r.Value)] {
						duplicates++
					}
					seen[string(r.Value)] = true
					if assigned[name] == nil {
						assigned[name] = map[int32]bool{}
					}
					assigned[name][r.Partition] = true
				})
				mu.Unlock()
				if err := c.CommitUncommittedOffsets(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
					errs <- fmt.Errorf("commit: %w", err)
					return
				}
			}
		}(name)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	out["records_read"] = len(seen)
	out["duplicates"] = duplicates
	var shape []int
	union := map[int32]bool{}
	overlap := false
	for _, ps := range assigned {
		shape = append(shape, len(ps))
		for p := range ps {
			overlap = overlap || union[p]
			union[p] = true
		}
	}
	sort.Ints(shape)
	out["assignment_shape"] = strings.ReplaceAll(fmt.Sprint(shape), " ", ", ")
	out["assignment_overlap"] = overlap
	committed, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		return nil, err
	}
	sum := int64(0)
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	out["committed_sum"] = sum
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	_, listed := groups[groupID]
	out["group_listed"] = listed
	described, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		return nil, err
	}
	out["group_state_after"] = described[groupID].State
	if _, err := adm.DeleteGroups(ctx, groupID); err != nil {
		return nil, err
	}
	out["group_deleted"] = true
	return out, nil
}
