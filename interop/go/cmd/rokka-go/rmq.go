// rocketmq-client-go v2 actions: produce (sync/async/oneway/batch; tags, keys, properties, delay
// levels), txn (transaction producer with check-back), push (clustering / broadcasting, concurrent /
// orderly, TAG / SQL92 selectors), pull (the lite pull consumer: subscribe, or assign + seek).
// Every action signs its requests with p.Credentials ([accessKey, secretKey]) when given.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func rmqMain(action string, p *Params) error {
	rlog.SetLogLevel("warn")
	if path := os.Getenv("ROKKA_GO_RLOG"); path != "" {
		_ = rlog.SetOutputPath(path)
	}
	switch action {
	case "produce":
		return rmqProduce(p)
	case "txn":
		return rmqTxn(p)
	case "push":
		return rmqPush(p)
	case "pull":
		return rmqPull(p)
	case "admin":
		return rmqAdmin(p)
	}
	return fmt.Errorf("rmq: unknown action %q", action)
}

func creds(p *Params) (primitive.Credentials, bool) {
	if len(p.Credentials) != 2 {
		return primitive.Credentials{}, false
	}
	return primitive.Credentials{AccessKey: p.Credentials[0], SecretKey: p.Credentials[1]}, true
}

func producerOpts(p *Params) []producer.Option {
	opts := []producer.Option{producer.WithNsResolver(primitive.NewPassthroughResolver([]string{p.Namesrv})),
		producer.WithGroupName(p.Group), producer.WithRetry(2), producer.WithSendMsgTimeout(p.timeout() / 3),
		producer.WithInstanceName(fmt.Sprintf("go-%d", os.Getpid())),
		producer.WithQueueSelector(producer.NewHashQueueSelector())}
	if c, ok := creds(p); ok {
		opts = append(opts, producer.WithCredentials(c))
	}
	return opts
}

func toRmq(topic string, m Msg) *primitive.Message {
	msg := primitive.NewMessage(topic, []byte(m.Value))
	if m.Tag != "" {
		msg.WithTag(m.Tag)
	}
	if m.Key != nil {
		msg.WithKeys([]string{*m.Key})
		msg.WithShardingKey(*m.Key) // the hash queue selector: one key, one queue
	}
	for _, kv := range append(append([][2]string{}, m.Headers...), m.Props...) {
		msg.WithProperty(kv[0], kv[1])
	}
	if m.Delay > 0 {
		msg.WithDelayTimeLevel(m.Delay)
	}
	return msg
}

func sendJSON(value string, r *primitive.SendResult, err error) map[string]any {
	if err != nil {
		return map[string]any{"value": value, "error": err.Error()}
	}
	return map[string]any{"value": value, "status": int(r.Status), "msg_id": r.MsgID,
		"queue": r.MessageQueue.QueueId, "offset": r.QueueOffset}
}

func rmqProduce(p *Params) error {
	prod, err := rocketmq.NewProducer(producerOpts(p)...)
	if err != nil {
		return err
	}
	if err := prod.Start(); err != nil {
		return fmt.Errorf("producer start: %w", err)
	}
	defer prod.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	msgs := make([]*primitive.Message, len(p.Messages))
	for i, m := range p.Messages {
		msgs[i] = toRmq(p.Topic, m)
	}
	failed := 0
	switch p.Mode {
	case "", "sync":
		for i, m := range msgs {
			r, err := prod.SendSync(ctx, m)
			if err != nil {
				failed++
			}
			emit("sent", sendJSON(p.Messages[i].Value, r, err))
		}
	case "batch":
		r, err := prod.SendSync(ctx, msgs...)
		if err != nil {
			failed++
		}
		emit("batch", sendJSON("", r, err))
	case "async":
		var wg sync.WaitGroup
		for i, m := range msgs {
			wg.Add(1)
			v := p.Messages[i].Value
			err := prod.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					failed++
				}
				emit("sent", sendJSON(v, r, err))
			}, m)
			if err != nil {
				wg.Done()
				failed++
				emit("sent", sendJSON(v, nil, err))
			}
		}
		wg.Wait()
	case "oneway":
		for i, m := range msgs {
			err := prod.SendOneWay(ctx, m)
			if err != nil {
				failed++
				emit("sent", sendJSON(p.Messages[i].Value, nil, err))
			} else {
				emit("sent", map[string]any{"value": p.Messages[i].Value, "status": "oneway"})
			}
		}
	default:
		return fmt.Errorf("unknown mode %q", p.Mode)
	}
	if failed > 0 {
		return fmt.Errorf("%d sends failed", failed)
	}
	return nil
}

// txListener answers ExecuteLocalTransaction from each message's tx_state and every check-back with p.Check.
type txListener struct {
	mu     sync.Mutex
	states map[string]string
	check  primitive.LocalTransactionState
	checks atomic.Int64
}

func txState(s string) primitive.LocalTransactionState {
	switch s {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return txState(l.states[string(m.Body)])
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.checks.Add(1)
	emit("check", map[string]any{"value": string(m.Body), "msg_id": m.MsgId, "answer": int(l.check)})
	return l.check
}

// rmqTxn sends every message as a half message, resolves it locally from its tx_state, and stays
// up (answering check-backs) until p.Count check-backs arrived or the timeout passed.
func rmqTxn(p *Params) error {
	l := &txListener{states: map[string]string{}, check: txState(p.Check)}
	for _, m := range p.Messages {
		l.states[m.Value] = m.TxState
	}
	prod, err := rocketmq.NewTransactionProducer(l, producerOpts(p)...)
	if err != nil {
		return err
	}
	if err := prod.Start(); err != nil {
		return fmt.Errorf("transaction producer start: %w", err)
	}
	defer prod.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	for _, m := range p.Messages {
		r, err := prod.SendMessageInTransaction(ctx, toRmq(p.Topic, m))
		if err != nil {
			return fmt.Errorf("send in transaction %q: %w", m.Value, err)
		}
		emit("half", map[string]any{"value": m.Value, "status": int(r.Status), "state": int(r.State),
			"msg_id": r.MsgID})
	}
	deadline := time.Now().Add(p.timeout())
	for l.checks.Load() < int64(p.Count) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	emit("checks", map[string]any{"count": l.checks.Load()})
	return nil
}

func msgJSON(m *primitive.MessageExt, props []string) map[string]any {
	pv := map[string]string{}
	for _, k := range props {
		pv[k] = m.GetProperty(k)
	}
	return map[string]any{"topic": m.Topic, "value": string(m.Body), "key": m.GetKeys(), "tags": m.GetTags(),
		"props": pv, "queue": m.Queue.QueueId, "offset": m.QueueOffset, "born_ts": m.BornTimestamp,
		"store_ts": m.StoreTimestamp, "reconsume": m.ReconsumeTimes, "msg_id": m.MsgId}
}

func consumerOpts(p *Params) []consumer.Option {
	opts := []consumer.Option{consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{p.Namesrv})),
		consumer.WithGroupName(p.Group), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithInstance(fmt.Sprintf("go-%d", os.Getpid())), consumer.WithPullInterval(0),
		consumer.WithConsumerPullTimeout(p.timeout() / 3)}
	if c, ok := creds(p); ok {
		opts = append(opts, consumer.WithCredentials(c))
	}
	return opts
}

func selector(p *Params) consumer.MessageSelector {
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: p.Expression}
	if p.Selector == "SQL92" {
		sel.Type = consumer.SQL92
	}
	if sel.Expression == "" {
		sel.Expression = "*"
	}
	return sel
}

// counter decides when a one-shot consumer may stop: p.Count messages, then p.LingerMs more.
type counter struct {
	mu     sync.Mutex
	n      int
	want   int
	fullAt time.Time
	linger time.Duration
	end    time.Time
}

func newCounter(p *Params) *counter {
	c := &counter{want: p.Count, linger: p.linger(), end: time.Now().Add(p.timeout())}
	if c.want <= 0 {
		c.fullAt = time.Now()
	}
	return c
}

func (c *counter) add(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += n
	if c.n >= c.want && c.fullAt.IsZero() {
		c.fullAt = time.Now()
	}
}

func (c *counter) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Now().After(c.end) {
		return true
	}
	return !c.fullAt.IsZero() && time.Since(c.fullAt) >= c.linger
}

func rmqPush(p *Params) error {
	opts := consumerOpts(p)
	if p.Broadcast {
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	}
	if p.Orderly {
		opts = append(opts, consumer.WithConsumerOrder(true))
	}
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return err
	}
	cnt := newCounter(p)
	topics := p.Topics
	if len(topics) == 0 {
		topics = []string{p.Topic}
	}
	for _, t := range topics {
		err = c.Subscribe(t, selector(p), func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			retry := false
			for _, m := range msgs {
				ev := msgJSON(m, p.Props)
				ev["orderly"] = p.Orderly
				if p.RetryFirst && m.ReconsumeTimes == 0 {
					retry = true
					emit("retry", ev)
					continue
				}
				emit("msg", ev)
				cnt.add(1)
			}
			if retry && p.Orderly {
				return consumer.SuspendCurrentQueueAMoment, nil
			}
			if retry {
				return consumer.ConsumeRetryLater, nil
			}
			return consumer.ConsumeSuccess, nil
		})
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", t, err)
		}
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("push consumer start: %w", err)
	}
	emit("ready", nil)
	for !cnt.done() {
		time.Sleep(50 * time.Millisecond)
	}
	return c.Shutdown() // persists the consumed offsets
}

// rmqPull is the lite pull consumer: Subscribe (group rebalance, committed offsets) or, with
// p.Seek ({"queueId": offset}), Assign every queue of the topic and seek the given ones.
func rmqPull(p *Params) error {
	opts := append(consumerOpts(p), consumer.WithAutoCommit(true))
	c, err := rocketmq.NewPullConsumer(opts...)
	if err != nil {
		return err
	}
	if p.Seek != nil {
		if err := c.Assign(p.Topic, nil); err != nil {
			return err
		}
	} else if err := c.Subscribe(p.Topic, selector(p)); err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("pull consumer start: %w", err)
	}
	if p.Seek != nil {
		mqs, err := c.GetTopicRouteInfo(p.Topic)
		if err != nil {
			return fmt.Errorf("route of %s: %w", p.Topic, err)
		}
		sort.Slice(mqs, func(i, j int) bool { return mqs[i].QueueId < mqs[j].QueueId })
		for _, mq := range mqs {
			if off, ok := p.Seek[fmt.Sprint(mq.QueueId)]; ok {
				c.SeekOffset(mq, off)
			}
		}
		if err := c.Assign(p.Topic, mqs); err != nil {
			return err
		}
	}
	emit("ready", nil)
	cnt := newCounter(p)
	ctx := context.Background()
	for !cnt.done() {
		cr, err := c.Poll(ctx, 300*time.Millisecond)
		if err != nil || cr == nil {
			continue
		}
		for _, m := range cr.GetMsgList() {
			emit("msg", msgJSON(m, p.Props))
		}
		cnt.add(len(cr.GetMsgList()))
		c.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	_ = c.PersistOffset(ctx, p.Topic)
	return c.Shutdown()
}

// rmqAdmin: the client's admin API (CreateTopic on the broker, FetchAllTopicList,
// FetchPublishMessageQueues, GetAllSubscriptionGroup, DeleteTopic), one event per step.
func rmqAdmin(p *Params) error {
	opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver([]string{p.Namesrv}))}
	if c, ok := creds(p); ok {
		opts = append(opts, admin.WithCredentials(c))
	}
	adm, err := admin.NewAdmin(opts...)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	broker := p.Brokers[0]
	err = adm.CreateTopic(ctx, admin.WithTopicCreate(p.Topic), admin.WithBrokerAddrCreate(broker),
		admin.WithReadQueueNums(p.Partitions), admin.WithWriteQueueNums(p.Partitions))
	emit("create", map[string]any{"err": errText(err)})
	deadline := time.Now().Add(p.timeout())
	var mqs []*primitive.MessageQueue
	for time.Now().Before(deadline) {
		if mqs, err = adm.FetchPublishMessageQueues(ctx, p.Topic); err == nil && len(mqs) == p.Partitions {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	emit("queues", map[string]any{"count": len(mqs), "err": errText(err)})
	list, err := adm.FetchAllTopicList(ctx)
	topics := []string{}
	if list != nil {
		topics = list.TopicList
	}
	emit("topics", map[string]any{"topics": topics, "err": errText(err)})
	subs, err := adm.GetAllSubscriptionGroup(ctx, broker, 5*time.Second)
	groups := []string{}
	if subs != nil {
		for g := range subs.SubscriptionGroupTable {
			groups = append(groups, g)
		}
	}
	sort.Strings(groups)
	emit("groups", map[string]any{"groups": groups, "err": errText(err)})
	err = adm.DeleteTopic(ctx, admin.WithTopicDelete(p.Topic), admin.WithBrokerAddrDelete(broker),
		admin.WithNameSrvAddr([]string{p.Namesrv}))
	emit("delete", map[string]any{"err": errText(err)})
	list, err = adm.FetchAllTopicList(ctx)
	topics = []string{}
	if list != nil {
		topics = list.TopicList
	}
	emit("topics_after", map[string]any{"topics": topics, "err": errText(err)})
	return nil
}
