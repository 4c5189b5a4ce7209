// Command berth-load drives concurrent callers against a running berth
// for a bounded time or count and prints latency percentiles, throughput
// and errors. With --agent it also starts a bare berth-agent on this
// machine and drives it directly, in rounds interleaved with berth's
// (baseline, berth, baseline, berth, ...), so a loaded machine moves both
// sides alike and the ratio between them means something.
//
//	berth-load --url http://127.0.0.1:8080 --token $TOKEN --surface mcp --callers 8 --duration 20s --agent bin/berth-agent
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "berth-load:", err)
		}
		os.Exit(1)
	}
}

// config is what one run measures.
type config struct {
	url, token, surface, command, image, agentBin string
	cpu                                           *cpuWatch
	callers, servers, count, rounds               int
	duration                                      time.Duration
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("berth-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "berth's URL")
	fs.StringVar(&c.token, "token", "", "a session token with berth:write and berth:exec (default $BERTH_TOKEN)")
	fs.StringVar(&c.surface, "surface", "rest", "what to drive: rest (session exec), mcp (the bash tool) or oneshot (REST run_bash_command with wait_seconds)")
	fs.StringVar(&c.command, "command", "true", "the command each call runs")
	fs.StringVar(&c.image, "image", "base", "image of the servers berth-load starts, one per caller")
	fs.StringVar(&c.agentBin, "agent", "", "a berth-agent binary: also measure bare agents on this machine (one per server), called directly, as the baseline")
	fs.IntVar(&c.callers, "callers", 8, "concurrent callers")
	fs.IntVar(&c.servers, "servers", 1, "servers (sandboxes) berth-load starts; caller i runs in server i mod servers (berth's --max-servers-per-user must allow them)")
	fs.IntVar(&c.count, "count", 0, "stop a round after this many calls in all (0: only --duration bounds it)")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds per side; with --agent they alternate")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each round runs at most")
	cpuFlag := fs.String("cpu", "", "NAME=PID,...: also report each round's CPU time per call of these processes, each alone and with its descendants (NAME+), and of berth-load and its children (the bare agents); e.g. berth=$(pgrep -f 'berth serve'),postgres=<postmaster pid>")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuFlag != "" {
		w, err := parseCPUWatch(*cpuFlag)
		if err != nil {
			return err
		}
		c.cpu = &w
	}
	if c.token == "" {
		c.token = getenv("BERTH_TOKEN")
	}
	switch {
	case c.token == "":
		return errors.New("--token or $BERTH_TOKEN is required")
	case c.callers < 1 || c.callers > 1024:
		return fmt.Errorf("--callers: want 1 to 1024, got %d", c.callers)
	case c.servers < 1 || c.servers > c.callers:
		return fmt.Errorf("--servers: want 1 to --callers (%d), got %d", c.callers, c.servers)
	case c.rounds < 1:
		return fmt.Errorf("--rounds: want at least 1, got %d", c.rounds)
	case c.duration <= 0 && c.count <= 0:
		return errors.New("--duration or --count must bound a round")
	case !slices.Contains([]string{"rest", "mcp", "oneshot"}, c.surface):
		return fmt.Errorf("--surface: want rest, mcp or oneshot, got %q", c.surface)
	}
	c.url = strings.TrimSuffix(c.url, "/")

	target, err := newBerthTarget(ctx, c)
	if err != nil {
		return err
	}
	defer target.close()
	sides := []side{{name: "berth " + c.surface, target: target}}
	if c.agentBin != "" {
		agent, err := startAgents(ctx, c.agentBin, c)
		if err != nil {
			return err
		}
		defer agent.close()
		sides = []side{{name: "bare agent", target: agent}, sides[0]}
	}
	fmt.Fprintf(stdout, "%d callers on %d server(s), command %q, %d round(s) of at most %s", c.callers, c.servers, c.command, c.rounds, c.duration)
	if c.count > 0 {
		fmt.Fprintf(stdout, " or %d calls", c.count)
	}
	fmt.Fprintln(stdout)
	for round := 1; round <= c.rounds; round++ {
		for i := range sides {
			r, err := measureCPU(ctx, sides[i].target, c)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, sides[i].name, err)
			}
			sides[i].rounds = append(sides[i].rounds, r)
			fmt.Fprintf(stdout, "round %d %-14s %s\n", round, sides[i].name, r)
			if c.cpu != nil {
				fmt.Fprintf(stdout, "        cpu per call: %s\n", formatCPU(c.cpu.keys(), r.cpu))
			}
		}
	}
	var cpuKeys []string
	if c.cpu != nil {
		cpuKeys = c.cpu.keys()
	}
	report(stdout, sides, cpuKeys)
	return nil
}

// side is one thing measured, with its rounds.
type side struct {
	name   string
	target target
	rounds []result
}

// report prints each side's medians across rounds (with their spread)
// and, with a baseline, berth's ratios to it.
func report(w io.Writer, sides []side, cpuKeys []string) {
	fmt.Fprintln(w, "medians across rounds (min-max):")
	for _, s := range sides {
		fmt.Fprintf(w, "  %-14s p50 %s  p99 %s  %s calls/s  errors %d\n", s.name,
			spread(s.rounds, func(r result) float64 { return ms(r.p50) }, "%.2f ms"),
			spread(s.rounds, func(r result) float64 { return ms(r.p99) }, "%.2f ms"),
			spread(s.rounds, func(r result) float64 { return r.throughput }, "%.0f"),
			sum(s.rounds, func(r result) int { return r.errors }))
		if len(s.rounds[0].cpu) > 0 {
			per := map[string]time.Duration{}
			for k := range s.rounds[0].cpu {
				per[k] = time.Duration(median(s.rounds, func(r result) float64 { return float64(r.cpu[k]) }))
			}
			fmt.Fprintf(w, "  %-14s cpu per call: %s\n", "", formatCPU(cpuKeys, per))
		}
	}
	if len(sides) == 2 {
		base, b := sides[0].rounds, sides[1].rounds
		fmt.Fprintf(w, "berth / bare agent: p50 %.2fx, p99 %.2fx, throughput %.2fx\n",
			median(b, func(r result) float64 { return ms(r.p50) })/median(base, func(r result) float64 { return ms(r.p50) }),
			median(b, func(r result) float64 { return ms(r.p99) })/median(base, func(r result) float64 { return ms(r.p99) }),
			median(b, func(r result) float64 { return r.throughput })/median(base, func(r result) float64 { return r.throughput }))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func spread(rs []result, f func(result) float64, format string) string {
	lo, hi := f(rs[0]), f(rs[0])
	for _, r := range rs {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	return fmt.Sprintf(format+" ("+format+"-"+format+")", median(rs, f), lo, hi)
}

func sum(rs []result, f func(result) int) int {
	n := 0
	for _, r := range rs {
		n += f(r)
	}
	return n
}
