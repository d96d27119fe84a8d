// sarama (github.com/IBM/sarama) actions: produce, consume, member, txn, admin.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func saramaMain(action string, p *Params) error {
	sarama.Logger = nullLogger{}
	switch action {
	case "create":
		return saramaCreate(p)
	case "produce":
		return saramaProduce(p)
	case "consume":
		return saramaConsume(p)
	case "member":
		return saramaMember(p)
	case "txn":
		return saramaTxn(p)
	case "admin":
		return saramaAdmin(p)
	case "eos":
		return saramaEOS(p)
	}
	return fmt.Errorf("sarama: unknown action %q", action)
}

type nullLogger struct{}

func (nullLogger) Print(...interface{})          {}
func (nullLogger) Printf(string, ...interface{}) {}
func (nullLogger) Println(...interface{})        {}

func saramaConfig(p *Params) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_8_0_0
	if p.Version != "" {
		v, err := sarama.ParseKafkaVersion(p.Version)
		if err != nil {
			fail(err)
		}
		c.Version = v
	}
	c.ClientID = "rokka-sarama"
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = p.timeout()
	c.Metadata.Retry.Max = 20
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 20
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Consumer.MaxWaitTime = 300 * time.Millisecond
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

func saramaCodec(name string) (sarama.CompressionCodec, error) {
	switch name {
	case "", "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("unknown codec %q", name)
}

func toSarama(topic string, m Msg) *sarama.ProducerMessage {
	pm := &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(m.Value)}
	if m.Key != nil {
		pm.Key = sarama.StringEncoder(*m.Key)
	}
	for _, h := range m.Headers {
		pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
	}
	if m.Partition != nil {
		pm.Partition = *m.Partition
	}
	if m.Timestamp != 0 {
		pm.Timestamp = time.UnixMilli(m.Timestamp)
	}
	return pm
}

func saramaRecord(m *sarama.ConsumerMessage) map[string]any {
	hs := [][2]string{}
	for _, h := range m.Headers {
		hs = append(hs, [2]string{string(h.Key), string(h.Value)})
	}
	var key any
	if m.Key != nil {
		key = string(m.Key)
	}
	return map[string]any{"topic": m.Topic, "partition": m.Partition, "offset": m.Offset, "key": key,
		"value": string(m.Value), "headers": hs, "timestamp": m.Timestamp.UnixMilli()}
}

func saramaCreate(p *Params) error {
	adm, err := sarama.NewClusterAdmin(p.Brokers, saramaConfig(p))
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := adm.CreateTopic(p.Topic, &sarama.TopicDetail{NumPartitions: int32(p.Partitions), ReplicationFactor: 1}, false); err != nil {
		return fmt.Errorf("create %s: %w", p.Topic, err)
	}
	emit("created", map[string]any{"topic": p.Topic, "partitions": p.Partitions})
	return nil
}

func saramaProduce(p *Params) error {
	c := saramaConfig(p)
	codec, err := saramaCodec(p.Compression)
	if err != nil {
		return err
	}
	c.Producer.Compression = codec
	if p.Idempotent != nil && *p.Idempotent {
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
	}
	for _, m := range p.Messages {
		if m.Partition != nil {
			c.Producer.Partitioner = sarama.NewManualPartitioner
		}
	}
	prod, err := sarama.NewSyncProducer(p.Brokers, c)
	if err != nil {
		return fmt.Errorf("new producer: %w", err)
	}
	defer prod.Close()
	msgs := make([]*sarama.ProducerMessage, len(p.Messages))
	for i, m := range p.Messages {
		msgs[i] = toSarama(p.Topic, m)
	}
	if err := prod.SendMessages(msgs); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	out := []map[string]any{}
	for _, m := range msgs {
		out = append(out, map[string]any{"partition": m.Partition, "offset": m.Offset})
	}
	emit("sent", map[string]any{"results": out})
	return nil
}

// saramaConsume reads every partition of p.Topic from the oldest offset (no group) until p.Count
// records, then lingers p.LingerMs.
func saramaConsume(p *Params) error {
	c := saramaConfig(p)
	if p.ReadCommit {
		c.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	cons, err := sarama.NewConsumer(p.Brokers, c)
	if err != nil {
		return err
	}
	defer cons.Close()
	parts, err := cons.Partitions(p.Topic)
	if err != nil {
		return err
	}
	cnt := newCounter(p)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for _, part := range parts {
		pc, err := cons.ConsumePartition(p.Topic, part, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("partition %d: %w", part, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			for {
				select {
				case m := <-pc.Messages():
					emit("record", saramaRecord(m))
					cnt.add(1)
				case e := <-pc.Errors():
					emit("warning", map[string]any{"error": e.Error()})
				case <-done:
					return
				}
			}
		}()
	}
	for !cnt.done() {
		time.Sleep(50 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	emit("consumed", map[string]any{"count": cnt.n})
	return nil
}

// groupHandler is one member's handler; adm reads the group's committed offsets back (ConsumeClaim).
type groupHandler struct {
	p   *Params
	adm sarama.ClusterAdmin
}

func (h groupHandler) Setup(s sarama.ConsumerGroupSession) error {
	emit("assigned", map[string]any{"member": h.p.Name, "partitions": s.Claims()[h.p.Topic]})
	return nil
}

func (h groupHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	emit("revoked", map[string]any{"member": h.p.Name, "partitions": s.Claims()[h.p.Topic]})
	return nil
}

// ConsumeClaim marks every message and commits synchronously (auto-commit off) whenever the claim
// has nothing more buffered, then reports the values as one batch with "committed" telling whether
// the broker holds that commit.
//
// Why it asks the broker: sarama's session.Commit() returns nothing.  A commit the coordinator refuses
// (REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION while the group rebalances, as Apache Kafka answers)
// only goes to the group's Errors() channel, later and without saying which batch it was.  The next
// owner of the partition then rightly gets those records again, and GroupLog fails if the first
// delivery claimed to be committed.  So after Commit() the handler fetches the group's committed
// offset of the claim's partition (OffsetFetch through adm) and reports the batch committed only if
// that offset is past the batch's last message.  This is exact here: the tests' offsets only move
// forward, and no other member can own the partition (and commit for it) before this ConsumeClaim
// returns, because an eager rebalance waits for this member to rejoin (up to the 20 s rebalance
// timeout, far longer than one OffsetFetch).  A failed check reports false and a "warning".
func (h groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	vals, parts, next := []string{}, []int32{}, int64(-1)
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(m, "")
			vals, parts, next = append(vals, string(m.Value)), append(parts, m.Partition), max(next, m.Offset+1)
			if len(claim.Messages()) > 0 && len(vals) < 100 {
				continue
			}
			s.Commit()
			committed, err := h.committedUpTo(claim.Topic(), claim.Partition(), next)
			if err != nil {
				emit("warning", map[string]any{"member": h.p.Name, "error": "commit check: " + err.Error()})
			}
			emit("batch", map[string]any{"member": h.p.Name, "values": vals, "partitions": parts, "committed": committed})
			vals, parts, next = []string{}, []int32{}, -1
		case <-s.Context().Done():
			return nil
		}
	}
}

// committedUpTo reports whether the group's committed offset of topic/part, as its coordinator
// answers, is at least next (the offset after the last message of a batch).
func (h groupHandler) committedUpTo(topic string, part int32, next int64) (bool, error) {
	resp, err := h.adm.ListConsumerGroupOffsets(h.p.Group, map[string][]int32{topic: {part}})
	if err != nil {
		return false, err
	}
	blk := resp.GetBlock(topic, part)
	if blk == nil {
		return false, fmt.Errorf("no committed offset for %s/%d in the answer", topic, part)
	}
	if blk.Err != sarama.ErrNoError {
		return false, blk.Err
	}
	return blk.Offset >= next, nil
}

func saramaMember(p *Params) error {
	c := saramaConfig(p)
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	c.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	c.Consumer.Return.Errors = true
	adm, err := sarama.NewClusterAdmin(p.Brokers, saramaConfig(p))
	if err != nil {
		return fmt.Errorf("admin client (commit checks): %w", err)
	}
	defer adm.Close()
	g, err := sarama.NewConsumerGroup(p.Brokers, p.Group, c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	closed := stdinClosed()
	go func() { <-closed; cancel() }()
	go func() {
		for e := range g.Errors() {
			if !errors.Is(e, context.Canceled) {
				emit("warning", map[string]any{"error": e.Error()})
			}
		}
	}()
	emit("ready", map[string]any{"member": p.Name})
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{p.Topic}, groupHandler{p, adm}); err != nil && ctx.Err() == nil {
			emit("warning", map[string]any{"error": err.Error()})
			time.Sleep(200 * time.Millisecond)
		}
	}
	return g.Close() // leaves the group
}

func saramaTxn(p *Params) error {
	c := saramaConfig(p)
	c.Producer.Idempotent = true
	c.Producer.Transaction.ID = p.TxnID
	c.Producer.Transaction.Timeout = 10 * time.Second
	c.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer(p.Brokers, c)
	if err != nil {
		return fmt.Errorf("new transactional producer: %w", err)
	}
	defer prod.Close()
	for i, t := range p.Txns {
		if err := prod.BeginTxn(); err != nil {
			return fmt.Errorf("begin %d: %w", i, err)
		}
		msgs := make([]*sarama.ProducerMessage, len(t.Messages))
		for j, m := range t.Messages {
			msgs[j] = toSarama(p.Topic, m)
		}
		if err := prod.SendMessages(msgs); err != nil {
			return fmt.Errorf("txn %d send: %w", i, err)
		}
		if t.Commit {
			err = prod.CommitTxn()
		} else {
			err = prod.AbortTxn()
		}
		if err != nil {
			return fmt.Errorf("txn %d end(commit=%v): %w", i, t.Commit, err)
		}
		emit("txn", map[string]any{"index": i, "commit": t.Commit, "records": len(msgs)})
	}
	return nil
}

// saramaAdmin walks the ClusterAdmin through topics, configs, partitions, offsets by time and groups.
func saramaAdmin(p *Params) error {
	c := saramaConfig(p)
	c.Producer.Partitioner = sarama.NewManualPartitioner
	client, err := sarama.NewClient(p.Brokers, c)
	if err != nil {
		return err
	}
	defer client.Close()
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return err
	}
	t := p.Topic
	ret := "3600000"
	err = adm.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &ret}}, false)
	emit("create", map[string]any{"err": errText(err)})
	emit("create_again", map[string]any{"err": errText(adm.CreateTopic(t,
		&sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false))})
	topics, err := adm.ListTopics()
	if err != nil {
		return err
	}
	emit("list", map[string]any{"partitions": topics[t].NumPartitions})

	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return err
	}
	for i, ts := range p.Timestamps {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: t, Partition: 0,
			Value: sarama.StringEncoder(fmt.Sprintf("t%d", i)), Timestamp: time.UnixMilli(ts)}); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	byTime := []any{}
	for _, ts := range append(append([]int64{}, p.Timestamps...), p.Timestamps[len(p.Timestamps)-1]+1) {
		o, err := client.GetOffset(t, 0, ts)
		byTime = append(byTime, map[string]any{"ts": ts, "offset": o, "err": errText(err)})
	}
	emit("offsets_by_time", map[string]any{"offsets": byTime})
	oldest, _ := client.GetOffset(t, 0, sarama.OffsetOldest)
	newest, _ := client.GetOffset(t, 0, sarama.OffsetNewest)
	emit("watermarks", map[string]any{"start0": oldest, "end0": newest})

	describe := func(ev string) error {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: t})
		if err != nil {
			return err
		}
		vals := map[string]string{}
		for _, e := range entries {
			vals[e.Name] = e.Value
		}
		emit(ev, map[string]any{"configs": vals})
		return nil
	}
	if err := describe("configs"); err != nil {
		return err
	}
	v2 := "7200000"
	emit("alter", map[string]any{"err": errText(adm.IncrementalAlterConfig(sarama.TopicResource, t,
		map[string]sarama.IncrementalAlterConfigsEntry{"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v2}}, false))})
	if err := describe("configs_after"); err != nil {
		return err
	}
	one := "1"
	emit("alter_bad", map[string]any{"err": errText(adm.AlterConfig(sarama.TopicResource, t,
		map[string]*string{"no.such.config": &one}, false))})
	emit("add_partition", map[string]any{"err": errText(adm.CreatePartitions(t, 3, nil, false))})
	topics, err = adm.ListTopics()
	if err != nil {
		return err
	}
	emit("list_after", map[string]any{"partitions": topics[t].NumPartitions})

	g := p.Group
	om, err := sarama.NewOffsetManagerFromClient(g, client)
	if err != nil {
		return err
	}
	pom, err := om.ManagePartition(t, 0)
	if err != nil {
		return err
	}
	pom.MarkOffset(2, "go")
	om.Commit()
	pom.Close()
	om.Close()
	ofr, err := adm.ListConsumerGroupOffsets(g, map[string][]int32{t: {0}})
	if err != nil {
		return err
	}
	blk := ofr.GetBlock(t, 0)
	emit("fetch_offsets", map[string]any{"offset": blk.Offset, "metadata": blk.Metadata, "err": kerrText(blk.Err)})
	groups, err := adm.ListConsumerGroups()
	if err != nil {
		return err
	}
	names := []string{}
	for name := range groups {
		names = append(names, name)
	}
	emit("groups", map[string]any{"groups": names})
	dg, err := adm.DescribeConsumerGroups([]string{g})
	if err != nil {
		return err
	}
	emit("describe_group", map[string]any{"state": dg[0].State, "members": len(dg[0].Members), "err": kerrText(dg[0].Err)})
	emit("delete_group", map[string]any{"err": errText(adm.DeleteConsumerGroup(g))})
	emit("delete_topic", map[string]any{"err": errText(adm.DeleteTopic(t))})
	if err := client.RefreshMetadata(); err != nil && !strings.Contains(err.Error(), "unknown topic") {
		return err
	}
	topics, err = adm.ListTopics()
	if err != nil {
		return err
	}
	left := []string{}
	for name := range topics {
		left = append(left, name)
	}
	sort.Strings(left)
	emit("topics_after_delete", map[string]any{"topics": left})
	return nil
}

func kerrText(e sarama.KError) any {
	if e == sarama.ErrNoError {
		return nil
	}
	return e.Error()
}

// eosHandler copies each consumed record to p.Output as "out-<value>" in its own transaction that
// also carries the group's offset (AddMessageToTxn -> AddOffsetsToTxn + TxnOffsetCommit).
type eosHandler struct {
	p    *Params
	prod sarama.SyncProducer
	cnt  *counter
}

func (eosHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (eosHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h eosHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if err := h.one(m); err != nil {
				emit("warning", map[string]any{"error": err.Error(), "value": string(m.Value)})
				return err
			}
			h.cnt.add(1)
			emit("batch", map[string]any{"values": []string{string(m.Value)}, "committed": true})
		case <-s.Context().Done():
			return nil
		}
	}
}

func (h eosHandler) one(m *sarama.ConsumerMessage) error {
	if err := h.prod.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	out := &sarama.ProducerMessage{Topic: h.p.Output, Key: sarama.ByteEncoder(m.Key),
		Value: sarama.StringEncoder("out-" + string(m.Value))}
	if _, _, err := h.prod.SendMessage(out); err != nil {
		_ = h.prod.AbortTxn()
		return fmt.Errorf("send: %w", err)
	}
	if err := h.prod.AddMessageToTxn(m, h.p.Group, nil); err != nil {
		_ = h.prod.AbortTxn()
		return fmt.Errorf("add offsets: %w", err)
	}
	if err := h.prod.CommitTxn(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func saramaEOS(p *Params) error {
	pc := saramaConfig(p)
	pc.Producer.Idempotent = true
	pc.Producer.Transaction.ID = p.TxnID
	pc.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer(p.Brokers, pc)
	if err != nil {
		return fmt.Errorf("transactional producer: %w", err)
	}
	defer prod.Close()
	cc := saramaConfig(p)
	cc.Consumer.IsolationLevel = sarama.ReadCommitted
	cc.Consumer.Offsets.AutoCommit.Enable = false
	cc.Consumer.Group.Session.Timeout = 10 * time.Second
	cc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	g, err := sarama.NewConsumerGroup(p.Brokers, p.Group, cc)
	if err != nil {
		return err
	}
	cnt := newCounter(p)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{p.Topic}, eosHandler{p, prod, cnt}); err != nil && ctx.Err() == nil {
				errs <- err
				return
			}
		}
	}()
	for !cnt.done() {
		select {
		case err := <-errs:
			cancel()
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	return g.Close()
}
