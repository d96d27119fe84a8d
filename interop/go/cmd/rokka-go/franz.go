// franz-go (kgo + kadm) actions: create, produce, consume, member, txn, admin.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func franzMain(action string, p *Params) error {
	switch action {
	case "create":
		return franzCreate(p)
	case "produce":
		return franzProduce(p)
	case "consume":
		return franzConsume(p)
	case "member":
		return franzMember(p)
	case "txn":
		return franzTxn(p)
	case "admin":
		return franzAdmin(p)
	case "eos":
		return franzEOS(p)
	case "acl":
		return franzACL(p)
	case "probe":
		return franzProbe(p)
	}
	return fmt.Errorf("franz: unknown action %q", action)
}

func franzOpts(p *Params, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(p.Brokers...), kgo.ClientID("rokka-franz"),
		kgo.DialTimeout(5 * time.Second), kgo.RetryTimeout(p.timeout()),
		kgo.RequestRetries(20), kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.FetchMaxWait(300 * time.Millisecond)}
	return append(opts, extra...)
}

func franzCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", name)
}

func toKgo(topic string, m Msg) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: []byte(m.Value)}
	if m.Key != nil {
		r.Key = []byte(*m.Key)
	}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	if m.Partition != nil {
		r.Partition = *m.Partition
	}
	if m.Timestamp != 0 {
		r.Timestamp = time.UnixMilli(m.Timestamp)
	}
	return r
}

func recordJSON(r *kgo.Record) map[string]any {
	hs := [][2]string{}
	for _, h := range r.Headers {
		hs = append(hs, [2]string{h.Key, string(h.Value)})
	}
	var key any
	if r.Key != nil {
		key = string(r.Key)
	}
	return map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset, "key": key,
		"value": string(r.Value), "headers": hs, "timestamp": r.Timestamp.UnixMilli()}
}

func franzCreate(p *Params) error {
	cl, err := kgo.NewClient(franzOpts(p)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	configs := map[string]*string{}
	for k, v := range p.Configs {
		configs[k] = strp(v)
	}
	res, err := adm.CreateTopics(ctx, int32(p.Partitions), 1, configs, p.Topic)
	if err != nil {
		return err
	}
	r := res[p.Topic]
	if r.Err != nil {
		return fmt.Errorf("create %s: %w (%s)", p.Topic, r.Err, r.ErrMessage)
	}
	emit("created", map[string]any{"topic": p.Topic, "partitions": r.NumPartitions})
	return nil
}

func franzProduce(p *Params) error {
	codec, err := franzCodec(p.Compression)
	if err != nil {
		return err
	}
	opts := franzOpts(p, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(p.timeout()))
	if p.Idempotent != nil && !*p.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	for _, m := range p.Messages {
		if m.Partition != nil {
			opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			break
		}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(p.Messages))
	for i, m := range p.Messages {
		recs[i] = toKgo(p.Topic, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	out := []map[string]any{}
	for _, r := range res {
		out = append(out, map[string]any{"partition": r.Record.Partition, "offset": r.Record.Offset})
	}
	emit("sent", map[string]any{"results": out})
	return nil
}

// franzConsume reads p.Topic (all partitions, no group unless p.Group) until p.Count records or
// the timeout, then lingers p.LingerMs for extras.
func franzConsume(p *Params) error {
	opts := franzOpts(p, kgo.ConsumeTopics(p.Topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if len(p.Topics) == 0 {
		opts = append(opts, kgo.ConsumeTopics(p.Topic))
	}
	if p.ReadCommit {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if p.Group != "" {
		opts = append(opts, kgo.ConsumerGroup(p.Group))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	got := 0
	deadline := time.Now().Add(p.timeout())
	var fullAt time.Time
	for time.Now().Before(deadline) {
		if got >= p.Count && !fullAt.IsZero() && time.Since(fullAt) >= p.linger() {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				emit("warning", map[string]any{"error": fe.Err.Error(), "topic": fe.Topic, "partition": fe.Partition})
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			emit("record", recordJSON(r))
		})
		if got >= p.Count && fullAt.IsZero() {
			fullAt = time.Now()
		}
	}
	if p.Group != "" {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
		defer cancel()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	emit("consumed", map[string]any{"count": got})
	return nil
}

// franzMember is one long-lived consumer group member: it commits each polled batch synchronously
// (rebalances are blocked while a batch is being processed) and leaves the group when stdin closes.
func franzMember(p *Params) error {
	start := kgo.NewOffset().AtStart()
	if p.FromStart != nil && !*p.FromStart {
		start = kgo.NewOffset().AtEnd()
	}
	opts := franzOpts(p, kgo.ConsumeTopics(p.Topic), kgo.ConsumerGroup(p.Group), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(start), kgo.BlockRebalanceOnPoll(), kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.RebalanceTimeout(20*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit("assigned", map[string]any{"member": p.Name, "partitions": m[p.Topic]})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit("revoked", map[string]any{"member": p.Name, "partitions": m[p.Topic]})
		}))
	if p.Instance != "" {
		opts = append(opts, kgo.InstanceID(p.Instance))
	}
	if p.ServerSide { // KIP-848 when the broker has ConsumerGroupHeartbeat, else the classic protocol
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	closed := stdinClosed()
	go func() { <-closed; cancel() }()
	emit("ready", map[string]any{"member": p.Name})
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				emit("warning", map[string]any{"error": fe.Err.Error()})
			}
		}
		recs := fs.Records()
		if len(recs) > 0 {
			cctx, ccancel := context.WithTimeout(context.Background(), p.timeout())
			cerr := cl.CommitRecords(cctx, recs...)
			ccancel()
			vals, keys, parts := []string{}, []any{}, []int32{}
			for _, r := range recs {
				vals = append(vals, string(r.Value))
				parts = append(parts, r.Partition)
				if r.Key == nil {
					keys = append(keys, nil)
				} else {
					keys = append(keys, string(r.Key))
				}
			}
			ev := map[string]any{"member": p.Name, "values": vals, "keys": keys, "partitions": parts,
				"committed": cerr == nil}
			if cerr != nil {
				ev["commit_error"] = cerr.Error()
			}
			emit("batch", ev)
		}
		cl.AllowRebalance()
	}
	cl.Close() // leaves the group
	return nil
}

// franzTxn runs p.Txns with one transactional producer (commit or abort each).
func franzTxn(p *Params) error {
	cl, err := kgo.NewClient(franzOpts(p, kgo.TransactionalID(p.TxnID), kgo.TransactionTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(p.timeout()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	for i, t := range p.Txns {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("begin %d: %w", i, err)
		}
		recs := make([]*kgo.Record, len(t.Messages))
		for j, m := range t.Messages {
			recs[j] = toKgo(p.Topic, m)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("txn %d produce: %w", i, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(t.Commit)); err != nil {
			return fmt.Errorf("txn %d end(commit=%v): %w", i, t.Commit, err)
		}
		emit("txn", map[string]any{"index": i, "commit": t.Commit, "records": len(recs)})
	}
	return nil
}

func errText(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

// franzAdmin walks kadm through topics, configs, partitions, offsets by time and groups, emitting
// one event per step; the test asserts on them.
func franzAdmin(p *Params) error {
	cl, err := kgo.NewClient(franzOpts(p, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	t := p.Topic

	res, err := adm.CreateTopics(ctx, 2, 1, map[string]*string{"retention.ms": strp("3600000")}, t)
	if err != nil {
		return err
	}
	emit("create", map[string]any{"err": errText(res[t].Err), "partitions": res[t].NumPartitions})
	res, err = adm.CreateTopics(ctx, 2, 1, nil, t)
	if err != nil {
		return err
	}
	emit("create_again", map[string]any{"err": errText(res[t].Err)})

	td, err := adm.ListTopics(ctx, t)
	if err != nil {
		return err
	}
	emit("list", map[string]any{"partitions": len(td[t].Partitions), "err": errText(td[t].Err)})

	recs := []*kgo.Record{}
	for i, ts := range p.Timestamps {
		recs = append(recs, &kgo.Record{Topic: t, Partition: 0, Value: []byte(fmt.Sprintf("t%d", i)),
			Timestamp: time.UnixMilli(ts)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	byTime := []any{}
	for _, ts := range append(append([]int64{}, p.Timestamps...), p.Timestamps[len(p.Timestamps)-1]+1) {
		lo, err := adm.ListOffsetsAfterMilli(ctx, ts, t)
		if err != nil {
			return err
		}
		o, _ := lo.Lookup(t, 0)
		byTime = append(byTime, map[string]any{"ts": ts, "offset": o.Offset, "err": errText(o.Err)})
	}
	emit("offsets_by_time", map[string]any{"offsets": byTime})
	so, err := adm.ListStartOffsets(ctx, t)
	if err != nil {
		return err
	}
	eo, err := adm.ListEndOffsets(ctx, t)
	if err != nil {
		return err
	}
	s0, _ := so.Lookup(t, 0)
	e0, _ := eo.Lookup(t, 0)
	e1, _ := eo.Lookup(t, 1)
	emit("watermarks", map[string]any{"start0": s0.Offset, "end0": e0.Offset, "end1": e1.Offset})

	describe := func(ev string) error {
		rc, err := adm.DescribeTopicConfigs(ctx, t)
		if err != nil {
			return err
		}
		r, err := rc.On(t, nil)
		if err != nil {
			return err
		}
		vals := map[string]any{}
		for _, c := range r.Configs {
			vals[c.Key] = c.MaybeValue()
		}
		emit(ev, map[string]any{"configs": vals, "err": errText(r.Err)})
		return nil
	}
	if err := describe("configs"); err != nil {
		return err
	}
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms",
		Value: strp("7200000")}}, t)
	if err != nil {
		return err
	}
	emit("alter", map[string]any{"err": errText(ar[0].Err)})
	if err := describe("configs_after"); err != nil {
		return err
	}
	bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config",
		Value: strp("1")}}, t)
	if err != nil {
		return err
	}
	emit("alter_bad", map[string]any{"err": errText(bad[0].Err)})

	cp, err := adm.CreatePartitions(ctx, 1, t)
	if err != nil {
		return err
	}
	emit("add_partition", map[string]any{"err": errText(cp[t].Err)})
	td, err = adm.ListTopics(ctx, t)
	if err != nil {
		return err
	}
	emit("list_after", map[string]any{"partitions": len(td[t].Partitions)})

	g := p.Group
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: t, Partition: 0, At: 2, LeaderEpoch: -1, Metadata: "go"})
	cr, err := adm.CommitOffsets(ctx, g, offs)
	if err != nil {
		return err
	}
	emit("commit", map[string]any{"err": errText(cr.Error())})
	fo, err := adm.FetchOffsets(ctx, g)
	if err != nil {
		return err
	}
	o, _ := fo.Lookup(t, 0)
	emit("fetch_offsets", map[string]any{"offset": o.At, "metadata": o.Metadata, "err": errText(o.Err)})
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	emit("groups", map[string]any{"groups": lg.Groups()})
	dg, err := adm.DescribeGroups(ctx, g)
	if err != nil {
		return err
	}
	emit("describe_group", map[string]any{"state": dg[g].State, "members": len(dg[g].Members),
		"err": errText(dg[g].Err)})
	dgr, err := adm.DeleteGroups(ctx, g)
	if err != nil {
		return err
	}
	emit("delete_group", map[string]any{"err": errText(dgr[g].Err)})
	dtr, err := adm.DeleteTopics(ctx, t)
	if err != nil {
		return err
	}
	emit("delete_topic", map[string]any{"err": errText(dtr[t].Err)})
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	names := all.Names()
	sort.Strings(names)
	emit("topics_after_delete", map[string]any{"topics": names})
	return nil
}

// franzEOS is consume-transform-produce with a GroupTransactSession: each polled batch of p.Topic is
// copied to p.Output as "out-<value>" in one transaction that also commits the group's offsets
// (TxnOffsetCommit).  With p.Mode "abort-first" the first batch's transaction is aborted, so its
// records are polled again.  It stops after p.Count committed records or the timeout.
func franzEOS(p *Params) error {
	s, err := kgo.NewGroupTransactSession(franzOpts(p, kgo.ConsumeTopics(p.Topic), kgo.ConsumerGroup(p.Group),
		kgo.TransactionalID(p.TxnID), kgo.TransactionTimeout(10*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RecordDeliveryTimeout(p.timeout()))...)
	if err != nil {
		return err
	}
	defer s.Close()
	aborts := 0
	if p.Mode == "abort-first" {
		aborts = 1
	}
	done := 0
	deadline := time.Now().Add(p.timeout())
	for done < p.Count && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := s.PollFetches(ctx)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		vals := []string{}
		for _, r := range recs {
			vals = append(vals, string(r.Value))
			s.Produce(context.Background(), &kgo.Record{Topic: p.Output, Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
		}
		ctx, cancel = context.WithTimeout(context.Background(), p.timeout())
		commit := aborts == 0
		committed, err := s.End(ctx, kgo.TransactionEndTry(commit))
		cancel()
		if err != nil {
			return fmt.Errorf("end(commit=%v): %w", commit, err)
		}
		if !commit {
			aborts--
		}
		if committed {
			done += len(recs)
		}
		emit("batch", map[string]any{"values": vals, "committed": committed, "wanted_commit": commit})
	}
	return nil
}

func scramOpt(user []string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user[0], Pass: user[1]}.AsSha256Mechanism())
}

// franzACL: the super user p.Credentials creates two topics and ACLs (kadm) letting p.User2 write,
// read and describe the first and read group p.Group; p.User2 then produces and consumes as far as
// that allows; the super user describes and deletes the ACLs, after which p.User2 is refused again.
func franzACL(p *Params) error {
	admCl, err := kgo.NewClient(franzOpts(p, scramOpt(p.Credentials))...)
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	mine, secret := p.Topic, p.Topic+"-secret"
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, mine, secret); err != nil {
		return err
	}
	principal := "User:" + p.User2[0]
	topicACL := kadm.NewACLs().Allow(principal).Topics(mine).Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe)
	groupACL := kadm.NewACLs().Allow(principal).Groups(p.Group).Operations(kadm.OpRead)
	errs := []any{}
	for _, b := range []*kadm.ACLBuilder{topicACL, groupACL} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return fmt.Errorf("create acls: %w", err)
		}
		for _, r := range res {
			errs = append(errs, errText(r.Err))
		}
	}
	emit("acl_create", map[string]any{"errors": errs})

	produce := func(ev, topic string) {
		cl, err := kgo.NewClient(franzOpts(p, scramOpt(p.User2), kgo.RecordDeliveryTimeout(5*time.Second),
			kgo.RetryTimeout(5*time.Second))...)
		if err != nil {
			emit(ev, map[string]any{"err": err.Error()})
			return
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		defer pcancel()
		err = cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte(ev)}).FirstErr()
		emit(ev, map[string]any{"err": errText(err)})
	}
	produce("produce_mine", mine)
	produce("produce_secret", secret)

	cons, err := kgo.NewClient(franzOpts(p, scramOpt(p.User2), kgo.ConsumeTopics(mine), kgo.ConsumerGroup(p.Group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	got := []string{}
	for len(got) < 1 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			emit("warning", map[string]any{"error": fe.Err.Error()})
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	cerr := cons.CommitUncommittedOffsets(ctx)
	cons.Close()
	emit("consumed", map[string]any{"values": got, "commit_err": errText(cerr)})

	filter := kadm.NewACLs().AnyResource().Allow(principal).AllowHosts().Operations(kadm.OpAny).
		ResourcePatternType(kadm.ACLPatternAny)
	dr, err := adm.DescribeACLs(ctx, filter)
	if err != nil {
		return fmt.Errorf("describe acls: %w", err)
	}
	described := []string{}
	for _, r := range dr {
		if r.Err != nil {
			return fmt.Errorf("describe acls: %w", r.Err)
		}
		for _, a := range r.Described {
			described = append(described, fmt.Sprintf("%s:%s:%s:%s:%s", a.Type, a.Name, a.Operation, a.Permission, a.Host))
		}
	}
	sort.Strings(described)
	emit("acl_describe", map[string]any{"acls": described})
	del, err := adm.DeleteACLs(ctx, filter)
	if err != nil {
		return fmt.Errorf("delete acls: %w", err)
	}
	n := 0
	for _, r := range del {
		n += len(r.Deleted)
	}
	emit("acl_delete", map[string]any{"deleted": n})
	produce("produce_after_delete", mine)
	return nil
}

// franzProbe: kadm calls beyond the basics (DeleteRecords, Lag, DescribeProducers, ListTransactions,
// DescribeTransactions, ListBrokers, DescribeBrokerConfigs), one event each with its outcome.
func franzProbe(p *Params) error {
	cl, err := kgo.NewClient(franzOpts(p, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	t := p.Topic
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, t); err != nil {
		return err
	}
	recs := []*kgo.Record{}
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: t, Partition: 0, Value: []byte(fmt.Sprintf("d%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: t, Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		emit("delete_records", map[string]any{"err": err.Error()})
	} else {
		r, _ := dr.Lookup(t, 0)
		emit("delete_records", map[string]any{"err": errText(r.Err), "low": r.LowWatermark})
	}
	so, err := adm.ListStartOffsets(ctx, t)
	if err != nil {
		return err
	}
	s0, _ := so.Lookup(t, 0)
	emit("start_after_delete", map[string]any{"offset": s0.Offset})
	got := []string{}
	rd, err := kgo.NewClient(franzOpts(p, kgo.ConsumeTopics(t), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	for len(got) < 6 && ctx.Err() == nil {
		fs := rd.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value)) })
	}
	rd.Close()
	emit("read_after_delete", map[string]any{"records": got})

	g := p.Group
	co := kadm.Offsets{}
	co.Add(kadm.Offset{Topic: t, Partition: 0, At: 7, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, g, co); err != nil {
		return err
	}
	lag, err := adm.Lag(ctx, g)
	if err != nil {
		emit("lag", map[string]any{"err": err.Error()})
	} else {
		l := lag[g]
		ml, _ := l.Lag.Lookup(t, 0)
		emit("lag", map[string]any{"err": errText(l.Error()), "lag": ml.Lag, "state": l.State})
	}
	brokers, err := adm.ListBrokers(ctx)
	emit("brokers", map[string]any{"count": len(brokers), "err": errText(err)})
	bc, err := adm.DescribeBrokerConfigs(ctx)
	n := 0
	if err == nil && len(bc) > 0 {
		n = len(bc[0].Configs)
		err = bc[0].Err
	}
	emit("broker_configs", map[string]any{"count": n, "err": errText(err)})
	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{t: {0: {}}})
	emit("describe_producers", map[string]any{"err": errText(err), "n": len(dp)})
	lt, err := adm.ListTransactions(ctx, nil, nil)
	emit("list_transactions", map[string]any{"err": errText(err), "n": len(lt)})
	dt, err := adm.DescribeTransactions(ctx, "no-such-txn")
	var derr error
	for _, d := range dt {
		derr = d.Err
	}
	emit("describe_transactions", map[string]any{"err": errText(err), "item_err": errText(derr)})
	return nil
}
