package tgdbos

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
)

// The executor identity. DBOS's Launch recovers the pending workflows of
// its executor id (Config.ExecutorID, DBOS__VMID, "local" by default) and
// application version: a second process launched with the same identity
// while the first lives takes over the first's running workflows, and
// both run them (each notifies again, each runs the next step). The id
// must stay the same across a process's restarts, or nobody recovers the
// runs it left, so it cannot simply be made unique per process. So
// NewContext holds the identity for as long as the context lives, and
// refuses one that a live process holds (ErrExecutorBusy).

// ErrExecutorBusy is NewContext's error for a DBOS executor identity
// (application, executor id and version) that another live process holds:
// launched, this process would recover that process's running workflows
// and run them a second time. Give each process its own executor id
// (Config.ExecutorID or DBOS__VMID), the same across its restarts.
var ErrExecutorBusy = errors.New("tgdbos: a live process holds this DBOS executor identity")

// lockCheck is how often a context checks that it still holds its
// identity (its lock's session is alive).
const lockCheck = 5 * time.Second

// executorLock holds a process's executor identity: a session advisory
// lock on the system database, on a connection of its own. Postgres frees
// it when the session ends: the process stops or dies (the kernel closes
// its socket), or its host stops answering (the keepalives set below, in
// about half a minute).
type executorLock struct {
	cfg    *pgx.ConnConfig
	key    int64
	name   string
	conn   *pgx.Conn
	logger *slog.Logger
}

// lockKey is the advisory lock's key of an identity.
func lockKey(app, executor, version string) int64 {
	sum := sha256.Sum256([]byte("toolguard dbos executor\x00" + app + "\x00" + executor + "\x00" + version))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// holdExecutor takes dc's executor identity on the system database dsn,
// waiting up to wait for a process that is stopping to free it, and keeps
// it until dc is shut down. If the identity is lost while dc runs (its
// session ended, and another process took it before this one could take
// it again), it logs why and shuts dc down: two live processes never run
// the same workflows.
func holdExecutor(ctx context.Context, dsn, app string, dc dbos.Context, wait time.Duration, logger *slog.Logger) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	// The server notices a host that stopped answering within about half
	// a minute, and frees the identity then.
	for k, v := range map[string]string{"application_name": "toolguard executor lock", "tcp_keepalives_idle": "10",
		"tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		cfg.RuntimeParams[k] = v
	}
	if logger == nil {
		logger = slog.Default()
	}
	l := &executorLock{cfg: cfg, key: lockKey(app, dc.GetExecutorID(), dc.GetApplicationVersion()), logger: logger,
		name: fmt.Sprintf("executor %q of app %q (version %q)", dc.GetExecutorID(), app, dc.GetApplicationVersion())}
	end := time.Now().Add(wait)
	for {
		held, err := l.take(ctx)
		if err != nil {
			return fmt.Errorf("tgdbos: taking the %s: %w", l.name, err)
		}
		if held {
			break
		}
		if time.Now().After(end) {
			return fmt.Errorf("%w: %s, on %s; this process would run that one's workflows a second time: "+
				"give each process its own executor id (Config.ExecutorID or DBOS__VMID), the same across its restarts",
				ErrExecutorBusy, l.name, redact(dsn))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	go l.keep(dc)
	return nil
}

// take connects if need be and tries the lock once: held reports whether
// this session holds it now.
func (l *executorLock) take(ctx context.Context) (held bool, err error) {
	if l.conn == nil {
		if l.conn, err = pgx.ConnectConfig(ctx, l.cfg); err != nil {
			l.conn = nil
			return false, err
		}
	}
	if err := l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&held); err != nil {
		l.drop()
		return false, err
	}
	return held, nil
}

// drop closes the lock's connection, which frees the lock.
func (l *executorLock) drop() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = l.conn.Close(ctx)
		cancel()
		l.conn = nil
	}
}

// keep holds the lock until dc is shut down, then frees it. Every
// lockCheck it checks the session; a session that ended is opened again
// and the lock taken again, and if another process took it meanwhile, dc
// is shut down.
func (l *executorLock) keep(dc dbos.Context) {
	defer l.drop()
	t := time.NewTicker(lockCheck)
	defer t.Stop()
	for {
		select {
		case <-dc.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), lockCheck)
		alive := l.conn != nil && l.conn.Ping(ctx) == nil
		if !alive {
			l.drop()
			held, err := l.take(ctx)
			switch {
			case err != nil:
				// Postgres does not answer: DBOS cannot run either, and
				// nobody can take the identity meanwhile. Try again.
				l.logger.Warn("tgdbos: cannot check the executor identity", "identity", l.name, "error", err)
			case !held:
				l.logger.Error("tgdbos: another process took this executor identity while its session was down; shutting DBOS down so that its workflows do not run twice",
					"identity", l.name)
				cancel()
				go func() { _ = dbos.Shutdown(dc, 30*time.Second) }()
				return
			}
		}
		cancel()
	}
}
