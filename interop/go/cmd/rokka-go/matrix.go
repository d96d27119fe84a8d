// Roles of the cross-protocol matrix (interop/matrix, protocol in interop/matrix/_role.py):
// rokka-go matrix-<franz|sarama|rmq> <producer|consumer>.
//
// producer: long-lived; each stdin line {"op":"produce","seq":n,"jobs":[{topic, txn, messages}]} is
// answered by {"event":"produced","seq":n,"results":[{acked, error}]}.  Kafka producers map a spec's
// tag / delay to the rocketmq.TAGS / rocketmq.DELAY headers; transactional jobs (txn = commit |
// abort) go through one transactional producer.  The RocketMQ producer sends KEYS, TAGS, user
// properties and the delay level; its txn jobs are half messages resolved by the local transaction
// (commit -> COMMIT, abort -> ROLLBACK).
// consumer: one-shot; reads every job's `read` until its `expect` count (or timeout_s), lingers
// linger_s for extras, prints msg events.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Job is one cell's read for a matrix consumer.
type Job struct {
	Topic      string   `json:"topic"`
	Read       string   `json:"read"`
	Expect     int      `json:"expect"`
	Expression string   `json:"expression"`
	Props      []string `json:"props"`
}

type spec struct {
	Value   string      `json:"value"`
	Key     *string     `json:"key"`
	Headers [][2]string `json:"headers"`
	Tag     string      `json:"tag"`
	Delay   int         `json:"delay"`
}

type prodJob struct {
	Topic    string `json:"topic"`
	Txn      string `json:"txn"`
	Messages []spec `json:"messages"`
}

type prodCmd struct {
	Seq  any       `json:"seq"`
	Jobs []prodJob `json:"jobs"`
}

type result struct {
	Acked int `json:"acked"`
	Error any `json:"error"`
}

func kafkaHeaders(s spec) [][2]string {
	h := append([][2]string{}, s.Headers...)
	if s.Tag != "" {
		h = append(h, [2]string{"rocketmq.TAGS", s.Tag})
	}
	if s.Delay > 0 {
		h = append(h, [2]string{"rocketmq.DELAY", strconv.Itoa(s.Delay)})
	}
	return h
}

func matrixMain(client, role string, p *Params) error {
	if len(p.Brokers) == 0 && p.Namesrv == "" {
		return fmt.Errorf("no brokers / namesrv")
	}
	switch client + "/" + role {
	case "franz/producer":
		return matrixProducer(newFranzSender(p))
	case "sarama/producer":
		return matrixProducer(newSaramaSender(p))
	case "rmq/producer":
		return matrixProducer(newRmqSender(p))
	case "franz/consumer":
		return matrixFranzConsumer(p)
	case "sarama/consumer":
		return matrixSaramaConsumer(p)
	case "rmq/consumer":
		return matrixRmqConsumer(p)
	}
	return fmt.Errorf("unknown matrix role %s/%s", client, role)
}

type sender interface {
	send(j prodJob) result
	close()
}

func matrixProducer(s sender, err error) error {
	if err != nil {
		return err
	}
	defer s.close()
	emit("started", nil)
	for {
		line, ok := readLine()
		if !ok {
			return nil
		}
		var cmd prodCmd
		if err := json.Unmarshal(line, &cmd); err != nil {
			return fmt.Errorf("bad command: %w", err)
		}
		results := []result{}
		for _, j := range cmd.Jobs {
			results = append(results, s.send(j))
		}
		emit("produced", map[string]any{"seq": cmd.Seq, "results": results})
	}
}

func failed(err error) result { return result{Acked: 0, Error: err.Error()} }

// ---------------------------------------------------------------- franz-go producer

type franzSender struct {
	p     *Params
	plain *kgo.Client
	txn   *kgo.Client
}

func newFranzSender(p *Params) (sender, error) {
	cl, err := kgo.NewClient(franzOpts(p, kgo.RecordDeliveryTimeout(p.timeout()))...)
	return &franzSender{p: p, plain: cl}, err
}

func (f *franzSender) send(j prodJob) result {
	recs := []*kgo.Record{}
	for _, s := range j.Messages {
		recs = append(recs, toKgo(j.Topic, Msg{Key: s.Key, Value: s.Value, Headers: kafkaHeaders(s)}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), p2t(f.p))
	defer cancel()
	if j.Txn == "" {
		if err := f.plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return failed(err)
		}
		return result{Acked: len(recs)}
	}
	if f.txn == nil {
		cl, err := kgo.NewClient(franzOpts(f.p, kgo.TransactionalID(f.p.TxnID), kgo.TransactionTimeout(10*time.Second),
			kgo.RecordDeliveryTimeout(p2t(f.p)))...)
		if err != nil {
			return failed(err)
		}
		f.txn = cl
	}
	if err := f.txn.BeginTransaction(); err != nil {
		return failed(err)
	}
	if err := f.txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = f.txn.EndTransaction(ctx, kgo.TryAbort)
		return failed(err)
	}
	if err := f.txn.EndTransaction(ctx, kgo.TransactionEndTry(j.Txn == "commit")); err != nil {
		return failed(err)
	}
	return result{Acked: len(recs)}
}

func (f *franzSender) close() {
	f.plain.Close()
	if f.txn != nil {
		f.txn.Close()
	}
}

func p2t(p *Params) time.Duration {
	if p.TimeoutMs <= 0 {
		return 60 * time.Second
	}
	return p.timeout()
}

// ---------------------------------------------------------------- sarama producer

type saramaSender struct {
	p     *Params
	plain sarama.SyncProducer
	txn   sarama.SyncProducer
}

func newSaramaSender(p *Params) (sender, error) {
	sarama.Logger = nullLogger{}
	prod, err := sarama.NewSyncProducer(p.Brokers, saramaConfig(p))
	return &saramaSender{p: p, plain: prod}, err
}

func (s *saramaSender) send(j prodJob) result {
	msgs := []*sarama.ProducerMessage{}
	for _, sp := range j.Messages {
		msgs = append(msgs, toSarama(j.Topic, Msg{Key: sp.Key, Value: sp.Value, Headers: kafkaHeaders(sp)}))
	}
	if j.Txn == "" {
		if err := s.plain.SendMessages(msgs); err != nil {
			return failed(err)
		}
		return result{Acked: len(msgs)}
	}
	if s.txn == nil {
		c := saramaConfig(s.p)
		c.Producer.Idempotent = true
		c.Producer.Transaction.ID = s.p.TxnID
		c.Net.MaxOpenRequests = 1
		prod, err := sarama.NewSyncProducer(s.p.Brokers, c)
		if err != nil {
			return failed(err)
		}
		s.txn = prod
	}
	if err := s.txn.BeginTxn(); err != nil {
		return failed(err)
	}
	if err := s.txn.SendMessages(msgs); err != nil {
		_ = s.txn.AbortTxn()
		return failed(err)
	}
	var err error
	if j.Txn == "commit" {
		err = s.txn.CommitTxn()
	} else {
		err = s.txn.AbortTxn()
	}
	if err != nil {
		return failed(err)
	}
	return result{Acked: len(msgs)}
}

func (s *saramaSender) close() {
	s.plain.Close()
	if s.txn != nil {
		s.txn.Close()
	}
}

// ---------------------------------------------------------------- rocketmq-client-go producer

type rmqSender struct {
	p     *Params
	plain rocketmq.Producer
	txn   rocketmq.TransactionProducer
	l     *txListener
}

func newRmqSender(p *Params) (sender, error) {
	rlog.SetLogLevel("error")
	prod, err := rocketmq.NewProducer(producerOpts(p)...)
	if err != nil {
		return nil, err
	}
	if err := prod.Start(); err != nil {
		return nil, err
	}
	return &rmqSender{p: p, plain: prod}, nil
}

func (r *rmqSender) send(j prodJob) result {
	ctx, cancel := context.WithTimeout(context.Background(), p2t(r.p))
	defer cancel()
	acked := 0
	var firstErr any
	if j.Txn != "" && r.txn == nil {
		r.l = &txListener{states: map[string]string{}, check: primitive.RollbackMessageState}
		tp := *r.p
		tp.Group = r.p.Group + "_TX"
		prod, err := rocketmq.NewTransactionProducer(r.l, producerOpts(&tp)...)
		if err == nil {
			err = prod.Start()
		}
		if err != nil {
			return failed(err)
		}
		r.txn = prod
	}
	for _, s := range j.Messages {
		m := toRmq(j.Topic, Msg{Key: s.Key, Value: s.Value, Tag: s.Tag, Props: s.Headers, Delay: s.Delay})
		var err error
		if j.Txn != "" {
			state := "rollback"
			if j.Txn == "commit" {
				state = "commit"
			}
			r.l.mu.Lock()
			r.l.states[s.Value] = state
			r.l.mu.Unlock()
			var res *primitive.TransactionSendResult
			res, err = r.txn.SendMessageInTransaction(ctx, m)
			if err == nil && res.Status != primitive.SendOK {
				err = fmt.Errorf("status %d", res.Status)
			}
		} else {
			var res *primitive.SendResult
			res, err = r.plain.SendSync(ctx, m)
			if err == nil && res.Status != primitive.SendOK {
				err = fmt.Errorf("status %d", res.Status)
			}
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err.Error()
			}
			continue
		}
		acked++
	}
	return result{Acked: acked, Error: firstErr}
}

func (r *rmqSender) close() {
	_ = r.plain.Shutdown()
	if r.txn != nil {
		_ = r.txn.Shutdown()
	}
}

// ---------------------------------------------------------------- consumers

type jobCounts struct {
	mu     sync.Mutex
	want   map[string]int
	have   map[string]int
	end    time.Time
	linger time.Duration
	fullAt time.Time
}

func newJobCounts(p *Params) *jobCounts {
	c := &jobCounts{want: map[string]int{}, have: map[string]int{},
		end:    time.Now().Add(time.Duration(p.TimeoutS * float64(time.Second))),
		linger: time.Duration(p.LingerS * float64(time.Second))}
	for _, j := range p.Jobs {
		c.want[j.Read] = j.Expect
	}
	return c
}

func (c *jobCounts) add(read string) {
	c.mu.Lock()
	c.have[read]++
	c.mu.Unlock()
}

func (c *jobCounts) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.After(c.end) {
		return true
	}
	for r, n := range c.want {
		if c.have[r] < n {
			return false
		}
	}
	if c.fullAt.IsZero() {
		c.fullAt = now
	}
	return now.Sub(c.fullAt) >= c.linger
}

func matrixFranzConsumer(p *Params) error {
	reads := []string{}
	seen := map[string]bool{}
	for _, j := range p.Jobs {
		if !seen[j.Read] {
			seen[j.Read] = true
			reads = append(reads, j.Read)
		}
	}
	cl, err := kgo.NewClient(franzOpts(p, kgo.ConsumeTopics(reads...), kgo.ConsumerGroup(p.Group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	counts := newJobCounts(p)
	for !counts.done() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				emit("warning", map[string]any{"error": fe.Err.Error(), "topic": fe.Topic})
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			counts.add(r.Topic)
			ev := recordJSON(r)
			ev["read"] = r.Topic
			emit("msg", ev)
		})
		if p.Commit && len(fs.Records()) > 0 {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cl.CommitRecords(cctx, fs.Records()...); err != nil {
				emit("warning", map[string]any{"error": "commit: " + err.Error()})
			}
			ccancel()
		}
	}
	return nil
}

func matrixRmqConsumer(p *Params) error {
	rlog.SetLogLevel("error")
	c, err := rocketmq.NewPushConsumer(consumerOpts(p)...)
	if err != nil {
		return err
	}
	counts := newJobCounts(p)
	propSet := map[string]bool{}
	for _, j := range p.Jobs {
		for _, k := range j.Props {
			propSet[k] = true
		}
	}
	props := []string{}
	for k := range propSet {
		props = append(props, k)
	}
	for _, j := range p.Jobs {
		expr := j.Expression
		if expr == "" {
			expr = "*"
		}
		err := c.Subscribe(j.Read, consumer.MessageSelector{Type: consumer.TAG, Expression: expr},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					counts.add(m.Topic)
					ev := msgJSON(m, props)
					ev["read"] = m.Topic
					ev["queue_id"] = m.Queue.QueueId
					emit("msg", ev)
				}
				return consumer.ConsumeSuccess, nil
			})
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", j.Read, err)
		}
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("push consumer start: %w", err)
	}
	for !counts.done() {
		time.Sleep(50 * time.Millisecond)
	}
	return c.Shutdown()
}

type matrixHandler struct {
	p      *Params
	counts *jobCounts
}

func (matrixHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (matrixHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h matrixHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.counts.add(m.Topic)
			ev := saramaRecord(m)
			ev["read"] = m.Topic
			emit("msg", ev)
			if h.p.Commit {
				s.MarkMessage(m, "")
				s.Commit()
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func matrixSaramaConsumer(p *Params) error {
	sarama.Logger = nullLogger{}
	c := saramaConfig(p)
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	g, err := sarama.NewConsumerGroup(p.Brokers, p.Group, c)
	if err != nil {
		return err
	}
	reads := []string{}
	seen := map[string]bool{}
	for _, j := range p.Jobs {
		if !seen[j.Read] {
			seen[j.Read] = true
			reads = append(reads, j.Read)
		}
	}
	counts := newJobCounts(p)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, reads, matrixHandler{p, counts}); err != nil && ctx.Err() == nil {
				emit("warning", map[string]any{"error": err.Error()})
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	for !counts.done() {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	return g.Close()
}
