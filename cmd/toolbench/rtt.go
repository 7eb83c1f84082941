package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/toolguard/toolguard/internal/redistest"
)

// outcome is one run's phases: the guard's, the peer's and the floor's, at
// c agents, through a proxy that delayed each direction by d (negative: no
// proxy).
type outcome struct {
	c                  int
	d                  time.Duration
	guard, peer, floor *phase
}

// sweep runs the workload at each -c and, with -rtt, each delay, one after
// another, printing each run as bench does, and then a table of them all.
// With -rtt the runs go through a loopback proxy (redistest.Proxy) that
// delays each direction by the run's D, so that a round trip costs 2·D
// more, as across a network: a pipeline of many commands costs one round
// trip, as it would.
func sweep(cfg config, w io.Writer) error {
	delays := cfg.rtts
	if !cfg.rtt {
		delays = []time.Duration{-1}
	}
	if cfg.cpuProfile != "" && len(cfg.cs)*len(delays) > 1 {
		return errors.New("-cpuprofile profiles one run: give one -c and at most one -rtt")
	}
	var outs []*outcome
	for _, c := range cfg.cs {
		for _, d := range delays {
			run := cfg
			run.c = c
			var p *redistest.Proxy
			if d >= 0 {
				var err error
				if p, run.addr, err = delayed(cfg.addr, d); err != nil {
					return err
				}
				fmt.Fprintf(w, "== %d agents, Redis through a proxy that delays each direction by %v ==\n", c, d)
			} else {
				fmt.Fprintf(w, "== %d agents ==\n", c)
			}
			o, err := bench(run, w)
			if p != nil {
				p.Close()
			}
			if err != nil {
				return err
			}
			o.d = d
			outs = append(outs, o)
			fmt.Fprintln(w)
		}
	}
	printSweep(w, cfg.n, outs)
	return nil
}

// delayed starts a proxy to the server of the redis:// URL addr that
// delays each direction by d, and returns it and the URL through it.
func delayed(addr string, d time.Duration) (*redistest.Proxy, string, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, "", err
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "6379")
	}
	p, err := redistest.StartProxy(target)
	if err != nil {
		return nil, "", err
	}
	p.Delay(d, d)
	u.Host = p.Addr()
	return p, u.String(), nil
}

// printSweep prints a row per run: its agents and delay, guard/peer and
// guard/floor, round trips per dispatch, and each path's p50/p99, the
// guard's beside the peer's.
func printSweep(w io.Writer, n int, outs []*outcome) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "agents\tD\tguard/peer\tguard/floor\tround trips guard/peer\tread p50/p99 guard | peer\twrite p50/p99 guard | peer\treplay p50/p99 guard | peer")
	q := func(h *histogram) string { return short(h.quantile(0.50)) + "/" + short(h.quantile(0.99)) }
	for _, o := range outs {
		d := "direct"
		if o.d >= 0 {
			d = o.d.String()
		}
		rt := func(ph *phase) string { return strconv.FormatFloat(float64(ph.roundTrips)/float64(n), 'f', 2, 64) }
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f\t%s/%s", o.c, d, float64(o.guard.time)/float64(o.peer.time),
			float64(o.guard.time)/float64(o.floor.time), rt(o.guard), rt(o.peer))
		for k := range nKinds {
			fmt.Fprintf(tw, "\t%s | %s", q(o.guard.latency(k)), q(o.peer.latency(k)))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}
