package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/toolset"
)

// With -store postgres://… toolbench measures the Postgres store: the
// workload's write is a transactional tool (pgstore.WriteTx) whose effect
// is a row of a drafts table in the store's database, and the peer is the
// layer a team on Postgres writes by hand instead, in the manner of
// Stripe's idempotency keys (pgPeer). Both run the same mix on one pool of
// -c connections to one server, taking turns in rounds. With -redis given
// too, the guard also runs on the Redis store (idem) at that address, the
// same write inserting its row in Postgres outside any transaction of the
// store's: what a team on Postgres gets from the Redis store. Each run's
// round trips and bytes on the wire are counted per dispatch by the
// connections themselves (countingConn), for Postgres and Redis alike, and
// the bytes each stored dispatch added to the database (the store's, or
// the peer's, tables). The last line is
//
//	guard/peer = X.XX
//
// the guard's wall time per dispatch on Postgres over the peer's.
//
//	go run ./cmd/toolbench -store postgres://postgres@127.0.0.1:5432/bench -peer -c 8,64 -n 20000
//	go run ./cmd/toolbench -store postgres://…/bench -peer -redis redis://127.0.0.1:6379/0 -c 8,64

// pgPeer is the idempotency layer a Go team on Postgres writes by hand,
// after Stripe's "Implementing Stripe-like idempotency keys in Postgres":
// a row per key, inserted or locked in the transaction that then makes
// the effect and stores the response.
//
//	BEGIN
//	INSERT INTO peer_keys (key) VALUES ($1) ON CONFLICT DO NOTHING
//	  0 rows: SELECT response FROM peer_keys WHERE key = $1 FOR UPDATE
//	          a response: COMMIT and return it (a replay)
//	the effect (the tool's statements, in the transaction)
//	UPDATE peer_keys SET response = $2 WHERE key = $1
//	COMMIT
//
// A call without an idempotency key (a read) is keyed by its call id, as
// the Redis peer does (-peer-reads=false runs reads with no round trip).
// It does none of what the guard does besides: no schema validation, no
// approval check, no call-id binding to an intent, no audit record, no
// check that a replay carries the same arguments, no status query.
type pgPeer struct {
	pool   *pgxpool.Pool
	reads  bool
	insert string // insertDraft, its table qualified
	keys   string // the keys' table, qualified
}

// pgDraft is the transactional write's output.
type pgDraft struct {
	DraftID  int64  `json:"draft_id"`
	OrderRef string `json:"order_ref"`
	Reason   string `json:"reason"`
}

// insertDraft is the write's effect, for the guard, the peer and the Redis
// store alike: a row of the run's bench_drafts (@ is its schema).
const insertDraft = "INSERT INTO @bench_drafts (op, order_ref, reason) VALUES ($1, $2, $3) RETURNING id"

// Dispatch runs call's tool through the layer; replayed reports a stored
// response returned without running it.
func (p *pgPeer) Dispatch(ctx context.Context, call guard.Call) (out []byte, replayed bool, err error) {
	key := call.Principal.TenantID + ":k:" + call.Context.IdempotencyKey
	if call.Context.IdempotencyKey == "" {
		if !p.reads {
			out, err := typed(orders.NoopGetOrder)(ctx, call.Principal, call.Proposal.Arguments)
			return out, false, err
		}
		key = call.Principal.TenantID + ":c:" + call.Context.CallID
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	tag, err := tx.Exec(ctx, "INSERT INTO "+p.keys+" (key) VALUES ($1) ON CONFLICT DO NOTHING", key)
	if err != nil {
		return nil, false, err
	}
	if tag.RowsAffected() == 0 {
		var resp []byte
		if err := tx.QueryRow(ctx, "SELECT response FROM "+p.keys+" WHERE key = $1 FOR UPDATE", key).Scan(&resp); err != nil {
			return nil, false, err
		}
		if resp == nil {
			return nil, false, errors.New("pgPeer: a key locked without a response")
		}
		return resp, true, tx.Commit(ctx)
	}
	switch call.Proposal.Name {
	case "get_order":
		out, err = typed(orders.NoopGetOrder)(ctx, call.Principal, call.Proposal.Arguments)
	case "create_refund_draft":
		out, err = typed(func(ctx context.Context, _ *guard.Invocation, in orders.RefundInput) (pgDraft, error) {
			return draft(ctx, tx, p.insert, key, in)
		})(ctx, call.Principal, call.Proposal.Arguments)
	default:
		err = fmt.Errorf("pgPeer: no tool %q", call.Proposal.Name)
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := tx.Exec(ctx, "UPDATE "+p.keys+" SET response = $2 WHERE key = $1", key, out); err != nil {
		return nil, false, err
	}
	return out, false, tx.Commit(ctx)
}

// draft inserts the write's row with insert through q (a transaction, or
// the pool).
func draft(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, insert, op string, in orders.RefundInput) (pgDraft, error) {
	d := pgDraft{OrderRef: in.OrderRef, Reason: in.Reason}
	return d, q.QueryRow(ctx, insert, op, in.OrderRef, in.Reason).Scan(&d.DraftID)
}

// pgTools are the guard's tools on Postgres: the read, and the write as a
// transactional tool (tx true) or as an ordinary one whose row is
// inserted on its own (for the Redis store).
func pgTools(insert string, pool *pgxpool.Pool, tx bool) *toolset.Set {
	get := toolset.Read("get_order", "Look up an order.", orders.NoopGetOrder, nil)
	opts := &toolset.Options[orders.RefundInput, pgDraft]{NeedsApproval: true, LoggedArguments: []string{"order_ref", "reason"}}
	if tx {
		return toolset.MustNew(get, pgstore.WriteTx("create_refund_draft", "Draft a refund.",
			func(ctx context.Context, inv *guard.Invocation, tx pgx.Tx, in orders.RefundInput) (pgDraft, error) {
				return draft(ctx, tx, insert, inv.IdempotencyKey, in)
			}, opts))
	}
	return toolset.MustNew(get, toolset.Write("create_refund_draft", "Draft a refund.",
		func(ctx context.Context, inv *guard.Invocation, in orders.RefundInput) (pgDraft, error) {
			return draft(ctx, pool, insert, inv.IdempotencyKey, in)
		}, opts))
}

// countingConn counts a connection's round trips (a write that follows a
// read, or the first) and its bytes both ways, into its wire.
type countingConn struct {
	net.Conn
	w        *wire
	readLast bool
}

// wire is what a run's connections carried.
type wire struct {
	roundTrips, bytes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.readLast || c.w.roundTrips.Load() == 0 {
		c.w.roundTrips.Add(1)
	}
	c.readLast = false
	n, err := c.Conn.Write(p)
	c.w.bytes.Add(int64(n))
	return n, err
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.bytes.Add(int64(n))
	if n > 0 {
		c.readLast = true
	}
	return n, err
}

// pgRun is one of the Postgres bench's runs: its phase, what it does for
// agent a's dispatch i, and what it stored and carried.
type pgRun struct {
	ph                *phase
	do                func(a, i int)
	stored            func() int64 // the bytes the run's records take now
	rts, bytes, grown int64
	wal               int64 // WAL bytes the server inserted during the run's batches, -1 when unknown
	cpu, server       time.Duration
	redisCPU          bool // the run's server CPU counts Redis's too
}

// benchPostgres runs the bench on Postgres at each -c and, with -rtt, each
// delay: through a loopback proxy to Postgres (and to Redis beside) that
// delays each direction by D, so that a round trip costs 2·D more, as
// across a network.
func benchPostgres(cfg config, redisAddr string, w io.Writer) error {
	delays := cfg.rtts
	if !cfg.rtt {
		delays = []time.Duration{-1}
	}
	var rows [][]string
	for _, c := range cfg.cs {
		for _, d := range delays {
			run := cfg
			run.c = c
			beside := redisAddr
			label := "direct"
			if d >= 0 {
				label = d.String()
				pg, err := url.Parse(cfg.store)
				if err != nil {
					return err
				}
				p, err := redistest.StartProxy(pg.Host)
				if err != nil {
					return err
				}
				defer p.Close()
				p.Delay(d, d)
				pg.Host = p.Addr()
				run.store = pg.String()
				if beside != "" {
					var rp *redistest.Proxy
					if rp, beside, err = delayed(beside, d); err != nil {
						return err
					}
					defer rp.Close()
				}
				fmt.Fprintf(w, "== %d agents, each direction delayed by %v ==\n", c, d)
			} else {
				fmt.Fprintf(w, "== %d agents ==\n", c)
			}
			row, err := benchPostgresOnce(run, beside, w)
			if err != nil {
				return err
			}
			rows = append(rows, append([]string{row[0], label}, row[1:]...))
			fmt.Fprintln(w)
		}
	}
	if len(rows) > 1 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "agents\tD\tguard/peer\tredis/peer\tround trips guard/peer/redis\twire bytes guard/peer/redis\tp50/p99 guard | peer | redis")
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		_ = tw.Flush()
	}
	return nil
}

// benchPostgresOnce runs the guard on Postgres, the peer, and the guard on
// Redis when redisAddr is set, at cfg.c agents, in cfg.rounds rounds, and
// returns its row of the closing table.
func benchPostgresOnce(cfg config, redisAddr string, w io.Writer) ([]string, error) {
	ctx := context.Background()
	wr := &wire{}
	pc, err := pgxpool.ParseConfig(cfg.store)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = int32(cfg.c)
	if cfg.pool > 0 {
		pc.MaxConns = int32(cfg.pool)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	dial := pc.ConnConfig.DialFunc
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, w: wr}, nil
	}
	pc.MinConns = pc.MaxConns
	pc.ConnConfig.RuntimeParams["application_name"] = "toolbench"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// The run's tables: the drafts (every run's effect) and the peer's
	// keys in a schema of the run's, the guard's store in another.
	schema := "tb" + strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36), 36)
	tgSchema := schema + "_tg"
	q := func(sql string) string { return strings.ReplaceAll(sql, "@", schema+".") }
	if _, err := pool.Exec(ctx, q("CREATE SCHEMA "+schema+"; CREATE TABLE @bench_drafts (id bigserial PRIMARY KEY, op text NOT NULL, order_ref text NOT NULL, reason text NOT NULL); CREATE TABLE @peer_keys (key text PRIMARY KEY, response bytea)")); err != nil {
		return nil, err
	}
	defer func() {
		if !cfg.keepKeys {
			_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE; DROP SCHEMA IF EXISTS "+tgSchema+" CASCADE")
		}
	}()
	store, err := pgstore.New(ctx, pool, pgstore.Options{Schema: tgSchema, TTL: time.Hour, SweepEvery: -1})
	if err != nil {
		return nil, err
	}
	insert := q(insertDraft)
	signer, _ := guard.NewSigner([]byte("toolbench-approval-key-0123456789abcdef"))
	size := func(filter string) func() int64 {
		return func() int64 {
			var n int64
			_ = pool.QueryRow(ctx, "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND "+filter).Scan(&n)
			return n
		}
	}
	newRun := func(name string, g func(ctx context.Context, call guard.Call) (*guard.Result, error), stored func() int64) *pgRun {
		ph := newPhase(name, cfg)
		agents := make([]*agent, cfg.c)
		for a := range agents {
			agents[a] = newAgent(a, cfg, signer)
		}
		return &pgRun{ph: ph, stored: stored, do: func(a, i int) {
			call, k := agents[a].next(i)
			t0 := time.Now()
			res, err := g(ctx, call)
			want := guard.DeliveryFresh
			if k == kindReplay {
				want = guard.DeliveryLocalReplay
			}
			ph.done(a, k, time.Since(t0), err != nil || res.Code != guard.CodeOK || res.Delivery != want)
		}}
	}
	gg := guard.New(pgTools(insert, pool, true), store, guard.Options{Signer: signer})
	runs := []*pgRun{newRun("guard", gg.Dispatch, size("n.nspname = '"+tgSchema+"'"))}
	if cfg.peer {
		pr := &pgPeer{pool: pool, reads: cfg.peerReads, insert: insert, keys: q("@peer_keys")}
		runs = append(runs, newRun("peer", func(ctx context.Context, call guard.Call) (*guard.Result, error) {
			out, replayed, err := pr.Dispatch(ctx, call)
			if err != nil {
				return nil, err
			}
			d := guard.DeliveryFresh
			if replayed {
				d = guard.DeliveryLocalReplay
			}
			return &guard.Result{Code: guard.CodeOK, Delivery: d, Data: out}, nil
		}, size("n.nspname = '"+schema+"' AND c.relname = 'peer_keys'")))
	}
	redisServer := func() time.Duration { return 0 }
	if redisAddr != "" {
		rdb, err := countingRedis(redisAddr, cfg.c, wr)
		if err != nil {
			return nil, err
		}
		defer rdb.Close()
		prefix := schema + ":"
		rs, err := idem.New(rdb, idem.Options{Prefix: prefix, TTL: time.Hour})
		if err != nil {
			return nil, err
		}
		defer func() {
			if !cfg.keepKeys {
				_ = redisconn.DeletePrefix(context.Background(), rdb, prefix)
			}
		}()
		rg := guard.New(pgTools(insert, pool, false), rs, guard.Options{Signer: signer})
		rr := newRun("redis", rg.Dispatch, func() int64 { return int64(redisconn.UsedMemory(ctx, rdb)) })
		rr.redisCPU = true
		redisServer = func() time.Duration { return redisconn.ServerCPU(ctx, rdb) }
		runs = append(runs, rr)
	}
	fmt.Fprintf(w, "toolbench: %d dispatches a run, %d agents, %d%% reads, %d%% writes, %d%% replays, %d tenants; runs: ",
		cfg.n, cfg.c, cfg.reads, cfg.writes, 100-cfg.reads-cfg.writes, cfg.tenants)
	for i, r := range runs {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprint(w, r.ph.name)
	}
	fmt.Fprintf(w, " in %d interleaved rounds\n", cfg.rounds)
	// Warm the pool: its connections are not the first run's cost.
	for range 2 * cfg.c {
		_, _ = pool.Exec(ctx, "SELECT 1")
	}
	for r := range cfg.rounds {
		lo, hi := r*cfg.n/cfg.rounds, (r+1)*cfg.n/cfg.rounds
		for j := range runs {
			run := runs[(j+r)%len(runs)] // take turns going first
			// What measures the run is read outside its counts.
			before, server, wal := run.stored(), backendCPU(ctx, pool), walBytes(ctx, pool)
			if run.redisCPU {
				server += redisServer()
			}
			rts, by, cpu := wr.roundTrips.Load(), wr.bytes.Load(), processCPU()
			run.ph.time += dispatch(cfg.c, lo, hi, run.do)
			run.cpu += processCPU() - cpu
			run.rts += wr.roundTrips.Load() - rts
			run.bytes += wr.bytes.Load() - by
			after := backendCPU(ctx, pool)
			if run.redisCPU {
				after += redisServer()
			}
			run.server += after - server
			if w := walBytes(ctx, pool); w >= 0 && wal >= 0 && run.wal >= 0 {
				run.wal += w - wal
			} else {
				run.wal = -1
			}
			run.grown += run.stored() - before
		}
	}
	per := func(d time.Duration) string { return short(d / time.Duration(cfg.n)) }
	q50 := func(h *histogram) string { return short(h.quantile(0.50)) + "/" + short(h.quantile(0.99)) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(label string, f func(r *pgRun) string) {
		fmt.Fprint(tw, label)
		for _, r := range runs {
			fmt.Fprint(tw, "\t"+f(r))
		}
		fmt.Fprintln(tw)
	}
	row("", func(r *pgRun) string { return r.ph.name })
	for k := range nKinds {
		row(kindNames[k]+"s", func(r *pgRun) string { return strconv.FormatInt(r.ph.kinds()[k], 10) })
	}
	row("unexpected", func(r *pgRun) string { return strconv.FormatInt(r.ph.failures.Load(), 10) })
	row("round trips per dispatch", func(r *pgRun) string { return fmt.Sprintf("%.3f", float64(r.rts)/float64(cfg.n)) })
	row("wire bytes per dispatch", func(r *pgRun) string { return strconv.FormatInt(r.bytes/int64(cfg.n), 10) })
	row("time per dispatch", func(r *pgRun) string { return per(r.ph.time) })
	row("dispatches/s", func(r *pgRun) string { return fmt.Sprintf("%.0f", float64(cfg.n)/r.ph.time.Seconds()) })
	row("p50/p99", func(r *pgRun) string { return q50(r.ph.latency()) })
	for k := range nKinds {
		row("p50/p99 "+kindNames[k], func(r *pgRun) string { return q50(r.ph.latency(k)) })
	}
	row("client cpu per dispatch", func(r *pgRun) string { return per(r.cpu) })
	row("server cpu per dispatch", func(r *pgRun) string {
		if r.server <= 0 {
			return "-" // a server not on this machine
		}
		return per(r.server)
	})
	row("WAL bytes per dispatch", func(r *pgRun) string {
		if r.wal < 0 {
			return "-"
		}
		return strconv.FormatInt(r.wal/int64(cfg.n), 10)
	})
	row("stored bytes per stored dispatch", func(r *pgRun) string {
		if n := r.ph.stored(); n > 0 {
			return strconv.FormatInt(r.grown/n, 10)
		}
		return "-"
	})
	_ = tw.Flush()
	g := runs[0]
	out := []string{strconv.Itoa(cfg.c), "-", "-", "", "", ""}
	names := []string{}
	for _, r := range runs {
		names = append(names, r.ph.name)
	}
	rtCol, byCol, latCol := "", "", ""
	for i, r := range runs {
		sep := ""
		if i > 0 {
			sep = " / "
		}
		rtCol += sep + fmt.Sprintf("%.2f", float64(r.rts)/float64(cfg.n))
		byCol += sep + strconv.FormatInt(r.bytes/int64(cfg.n), 10)
		latCol += map[bool]string{true: " | ", false: ""}[i > 0] + q50(r.ph.latency())
	}
	out[3], out[4], out[5] = rtCol, byCol, latCol
	fmt.Fprintln(w)
	for _, r := range runs[1:] {
		if r.ph.name == "peer" {
			out[1] = fmt.Sprintf("%.2f", float64(g.ph.time)/float64(r.ph.time))
		}
	}
	for _, r := range runs[1:] {
		if r.ph.name == "redis" {
			fmt.Fprintf(w, "guard on redis/guard on postgres = %.2f\n", float64(r.ph.time)/float64(g.ph.time))
			for _, p := range runs[1:] {
				if p.ph.name == "peer" {
					out[2] = fmt.Sprintf("%.2f", float64(r.ph.time)/float64(p.ph.time))
				}
			}
		}
	}
	if out[1] != "-" {
		fmt.Fprintf(w, "guard/peer = %s\n", out[1])
	}
	return out, nil
}

// countingRedis opens a client of the standalone Redis server at the
// redis:// URL addr whose connections count into wr.
func countingRedis(addr string, poolSize int, wr *wire) (*redis.Client, error) {
	opt, err := redis.ParseURL(addr)
	if err != nil {
		return nil, fmt.Errorf("-redis %q: a redis:// URL of one server: %w", addr, err)
	}
	opt.PoolSize, opt.ContextTimeoutEnabled = poolSize, true
	d := &net.Dialer{Timeout: 5 * time.Second}
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, w: wr}, nil
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// walBytes is the server's WAL insert position in bytes: what it wrote
// between two readings, whoever wrote it (a quiet server: the run's
// connections), or -1 when it cannot be read.
func walBytes(ctx context.Context, pool *pgxpool.Pool) int64 {
	var n int64
	if pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").Scan(&n) != nil {
		return -1
	}
	return n
}

// backendCPU is the CPU time the pool's server processes have used, read
// from /proc: 0 when the server is not on this machine.
func backendCPU(ctx context.Context, pool *pgxpool.Pool) time.Duration {
	rows, err := pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'toolbench' AND datname = current_database()")
	if err != nil {
		return 0
	}
	defer rows.Close()
	var total time.Duration
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			continue
		}
		total += procCPU(pid)
	}
	return total
}

// procCPU is a process's user and system CPU time from /proc/PID/stat, 0
// if it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}
