//! `ternio-bench soak`: well-behaved clients and attackers together against
//! the release `echo_server` example with its defaults (issue 21, item 6).
//!
//! ```text
//! cargo build --release -p ternio-bench -p ternio-examples --example echo_server
//! target/release/ternio-bench soak --quick --compare          # 2 x 20 s, 500 clients
//! target/release/ternio-bench soak --compare --duration 10m   # 2 x 10 min, 5,000 clients
//! ```
//!
//! N well-behaved clients (default 5,000; a fifth over WebSocket), 50 to a
//! source address of 127.10.0.0/16, each send one 32-byte `Echo` every 2 s
//! and check every answer. With `--attackers`, bounded numbers of
//! slow-frame, upgrade-flood, never-reading and handshake-flood connections
//! (see `soak/attackers.rs`) run alongside from 127.21-24.0.0/16. The
//! server's RSS is sampled every few seconds. `--compare` runs a baseline
//! phase and then an attack phase, each against a fresh server, and fails
//! (exit 1) when the attack phase's p99 is more than twice the baseline's,
//! its throughput less than half, any echo was lost or wrong, or the
//! server's RSS kept growing. Results go to `DIR/soak.jsonl` (default
//! `target/soak`), the server's log to `DIR/server-PHASE.log`.
//!
//! Loopback only, bounded in count and time; not part of CI (`smoke` and
//! `cargo test` never start it).

mod attackers;
mod clients;
pub(crate) mod server;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde::Serialize;
use tokio::sync::watch;

use self::attackers::{AttackFigures, Kind, OpenNow, Target};
use self::clients::{ClientPlan, ClientShared};
use self::server::{EchoServer, RssSampler};
use crate::environment::Environment;
use crate::usage;

/// Well-behaved clients per source address.
const CLIENTS_PER_ADDRESS: usize = 50;
/// Well-behaved connections opened per second while ramping up.
const RAMP_RATE: f64 = 500.0;
/// Time after the ramp before the measurement window opens.
const SETTLE: Duration = Duration::from_secs(2);

/// `ternio-bench soak`'s command line.
#[derive(clap::Args)]
pub struct SoakArgs {
    /// Well-behaved clients (default 5,000; 500 with --quick).
    #[arg(long)]
    clients: Option<usize>,
    /// Length of each phase: `600`, `90s`, `10m` (default 10m; 20s with --quick).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// 500 clients, 20 s, a fifth of the attackers: to try it.
    #[arg(long)]
    quick: bool,
    /// Run the attackers alongside the clients.
    #[arg(long)]
    attackers: bool,
    /// A baseline phase, then the same with attackers; fail past 2x.
    #[arg(long)]
    compare: bool,
    /// Milliseconds between two echoes of one client.
    #[arg(long, default_value_t = 2000)]
    interval_ms: u64,
    /// Percent of the clients that use WebSocket.
    #[arg(long, default_value_t = 20)]
    ws_percent: usize,
    /// Slow-frame connections (default 300; 60 with --quick).
    #[arg(long)]
    slow_frame: Option<usize>,
    /// Upgrade-flood connections (default 300; 60 with --quick).
    #[arg(long)]
    upgrade_flood: Option<usize>,
    /// Never-reading connections (default 50; 10 with --quick).
    #[arg(long)]
    never_reading: Option<usize>,
    /// Handshake-flood connections (default 200; 40 with --quick).
    #[arg(long)]
    handshake_flood: Option<usize>,
    /// The echo server binary (default: `examples/echo_server` next to this one).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Output folder.
    #[arg(long, default_value = "target/soak")]
    out: PathBuf,
}

/// Parses `600`, `600s`, `10m` or `1h`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("bad duration {text:?}"))?;
    let seconds = match unit {
        "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        _ => return Err(format!("bad duration unit in {text:?} (s, m or h)")),
    };
    Ok(Duration::from_secs(seconds))
}

/// The settings of a run, defaults applied.
#[derive(Debug, Clone, Serialize)]
struct Settings {
    clients: usize,
    duration_s: u64,
    interval_ms: u64,
    ws_percent: usize,
    attackers: [(Kind, usize); 4],
}

/// One phase's figures, as written to `soak.jsonl`.
#[derive(Debug, Clone, Serialize)]
struct PhaseFigures {
    phase: &'static str,
    settings: Settings,
    /// Seconds of the measurement window.
    window_s: f64,
    sent: u64,
    answered: u64,
    mismatched: u64,
    failed: u64,
    /// Sent and not answered with the same payload.
    lost: u64,
    connect_failures: u64,
    reconnects: u64,
    /// Answered echoes per second inside the window.
    throughput: f64,
    p50_us: u64,
    p99_us: u64,
    p999_us: u64,
    max_us: u64,
    rss_min_kib: u64,
    rss_max_kib: u64,
    rss_last_kib: u64,
    /// Max RSS of the window's second half minus its first half's, KiB.
    rss_growth_kib: i64,
    /// `(seconds, KiB)` samples.
    rss_samples: Vec<(f64, u64)>,
    server_alive: bool,
    /// The server's CPU time over the window, percent of one core.
    server_cpu_percent: f64,
    /// This harness's (clients and attackers), percent of one core.
    harness_cpu_percent: f64,
    /// `/proc/loadavg` when the phase started: other work on the machine.
    load_average: String,
    attackers: Vec<AttackFigures>,
    /// The first few client errors.
    errors: Vec<String>,
}

/// The comparison line of `soak.jsonl`.
#[derive(Debug, Clone, Serialize)]
struct Verdict {
    phase: &'static str,
    p99_ratio: Option<f64>,
    throughput_ratio: Option<f64>,
    failures: Vec<String>,
    pass: bool,
}

/// A JSON line: the environment and one record.
#[derive(Serialize)]
struct Line<'a, T: Serialize> {
    environment: &'a Environment,
    #[serde(flatten)]
    record: &'a T,
}

/// Runs the soak test.
pub fn run(args: SoakArgs) -> Result<ExitCode> {
    let fd_limit = usage::raise_open_file_limit();
    let quick = args.quick;
    let pick = |given: Option<usize>, full: usize, small: usize| {
        given.unwrap_or(if quick { small } else { full })
    };
    let settings = Settings {
        clients: pick(args.clients, 5000, 500),
        duration_s: args
            .duration
            .unwrap_or(Duration::from_secs(if quick { 20 } else { 600 }))
            .as_secs(),
        interval_ms: args.interval_ms.max(10),
        ws_percent: args.ws_percent.min(100),
        attackers: [
            (Kind::SlowFrame, pick(args.slow_frame, 300, 60)),
            (Kind::UpgradeFlood, pick(args.upgrade_flood, 300, 60)),
            (Kind::NeverReading, pick(args.never_reading, 50, 10)),
            (Kind::HandshakeFlood, pick(args.handshake_flood, 200, 40)),
        ],
    };
    let attacker_total: usize = settings.attackers.iter().map(|(_, n)| n).sum();
    let needed = settings.clients + attacker_total + 256;
    if (fd_limit as usize) < needed {
        bail!("the open-file limit is {fd_limit}; this run needs about {needed}");
    }
    let binary = match args.server {
        Some(path) => path,
        None => server::default_binary()?,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let environment = Environment::capture(if quick { "soak-quick" } else { "soak" });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let attack_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("attacker")
        .enable_all()
        .build()?;
    let phases: &[bool] = if args.compare {
        &[false, true]
    } else if args.attackers {
        &[true]
    } else {
        &[false]
    };
    let jsonl = args.out.join("soak.jsonl");
    let mut results = Vec::new();
    for &attack in phases {
        let name = if attack { "attack" } else { "baseline" };
        println!(
            "soak {name}: {} clients, {} s{}",
            settings.clients,
            settings.duration_s,
            if attack {
                format!(
                    ", attackers {}",
                    settings
                        .attackers
                        .iter()
                        .map(|(kind, n)| format!("{} x{n}", kind.name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                String::new()
            }
        );
        let log = args.out.join(format!("server-{name}.log"));
        let figures = run_phase(
            &runtime,
            &attack_runtime,
            &settings,
            &binary,
            &log,
            name,
            attack,
        )?;
        print_phase(&figures);
        append(&jsonl, &environment, &figures)?;
        results.push(figures);
    }
    let verdict = judge(&results);
    if let (Some(p99), Some(throughput)) = (verdict.p99_ratio, verdict.throughput_ratio) {
        println!(
            "ratios: p99 attack/baseline {p99:.2}, throughput attack/baseline {throughput:.3}"
        );
    }
    for failure in &verdict.failures {
        println!("FAILED: {failure}");
    }
    append(&jsonl, &environment, &verdict)?;
    println!(
        "{}; results: {}",
        if verdict.pass { "pass" } else { "FAIL" },
        jsonl.display()
    );
    Ok(if verdict.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn append<T: Serialize>(
    path: &std::path::Path,
    environment: &Environment,
    record: &T,
) -> Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    serde_json::to_writer(
        &mut file,
        &Line {
            environment,
            record,
        },
    )?;
    writeln!(file)?;
    Ok(())
}

fn run_phase(
    runtime: &tokio::runtime::Runtime,
    attack_runtime: &tokio::runtime::Runtime,
    settings: &Settings,
    binary: &std::path::Path,
    log: &std::path::Path,
    phase: &'static str,
    attack: bool,
) -> Result<PhaseFigures> {
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut server = EchoServer::spawn(binary, log)?;
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let duration = Duration::from_secs(settings.duration_s);
    let rss_every = if duration >= Duration::from_secs(120) {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(1)
    };
    let sampler = RssSampler::start(server.pid(), rss_every, started);
    let shared = Arc::new(ClientShared::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let open_now = Arc::new(OpenNow::default());
    let target = Target {
        tcp: server.tcp,
        ws: server.ws,
        public_key: server.public_key,
    };
    let ramp = Duration::from_secs_f64(settings.clients as f64 / RAMP_RATE);
    let window_start = ramp + SETTLE;
    if window_start + Duration::from_secs(5) > duration {
        bail!("a phase of {duration:?} leaves no measurement window after a ramp of {ramp:?}");
    }

    let client_tasks = runtime.block_on(async {
        let now = tokio::time::Instant::now();
        let addresses = settings.clients.div_ceil(CLIENTS_PER_ADDRESS).max(1);
        let interval = Duration::from_millis(settings.interval_ms);
        let client_tasks: Vec<_> = (0..settings.clients)
            .map(|i| {
                let websocket = i % 100 < settings.ws_percent;
                let plan = ClientPlan {
                    id: i as u32,
                    source: clients::source_ip(10, i % addresses),
                    server: if websocket { server.ws } else { server.tcp },
                    websocket,
                    interval,
                    start: now + Duration::from_secs_f64(i as f64 / RAMP_RATE),
                };
                tokio::spawn(clients::run(plan, shared.clone(), stop_rx.clone()))
            })
            .collect();
        client_tasks
    });
    // The attackers get their own runtime (their own threads), as they
    // would be other machines: a slow syscall of theirs (a bind that scans
    // ports) must not stall the well-behaved clients' workers.
    let mut attack_tasks = Vec::new();
    let mut attack_stats = Vec::new();
    if attack {
        let _entered = attack_runtime.enter();
        for (kind, count) in settings.attackers {
            let (stats, tasks) =
                attackers::spawn(kind, count, target, stop_rx.clone(), open_now.clone());
            attack_stats.push(stats);
            attack_tasks.extend(tasks);
        }
    }

    // The timeline, on this thread: open the window, report progress, stop.
    let mut window_opened = None;
    let mut cpu_at_open = (Duration::ZERO, Duration::ZERO);
    let mut next_report = Duration::from_secs(if duration >= Duration::from_secs(120) {
        60
    } else {
        5
    });
    while started.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(100));
        let elapsed = started.elapsed();
        if window_opened.is_none() && elapsed >= window_start {
            cpu_at_open = (
                usage::process_cpu_time(server.pid()).unwrap_or_default(),
                usage::cpu_time(),
            );
            shared.measuring.store(true, Ordering::Relaxed);
            window_opened = Some(Instant::now());
        }
        if elapsed >= next_report {
            let stats = &shared.stats;
            let rss = usage::process_status(server.pid()).rss_kib;
            println!(
                "  {:>4} s: {} connected, {} sent, {} answered, {} failed, {} connect failures, server RSS {} MiB{}",
                elapsed.as_secs(),
                stats.connected.load(Ordering::Relaxed),
                stats.sent.load(Ordering::Relaxed),
                stats.answered.load(Ordering::Relaxed),
                stats.failed.load(Ordering::Relaxed),
                stats.connect_failures.load(Ordering::Relaxed),
                rss / 1024,
                if attack {
                    format!(
                        ", attackers open {:?}",
                        open_now
                            .0
                            .iter()
                            .map(|n| n.load(Ordering::Relaxed))
                            .collect::<Vec<_>>()
                    )
                } else {
                    String::new()
                }
            );
            next_report += next_report.min(Duration::from_secs(60));
        }
    }
    shared.measuring.store(false, Ordering::Relaxed);
    let window = window_opened.map_or(Duration::ZERO, |at| at.elapsed());
    let answered_in_window = shared.stats.answered_in_window.load(Ordering::Relaxed);
    let percent = |used: Duration| 100.0 * used.as_secs_f64() / window.as_secs_f64().max(1e-9);
    let server_cpu_percent = percent(
        usage::process_cpu_time(server.pid())
            .unwrap_or_default()
            .saturating_sub(cpu_at_open.0),
    );
    let harness_cpu_percent = percent(usage::cpu_time().saturating_sub(cpu_at_open.1));
    let still_open: Vec<u64> = open_now
        .0
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    let _ = stop_tx.send(true);
    runtime.block_on(async {
        let joined = async {
            for task in client_tasks {
                let _ = task.await;
            }
            for task in attack_tasks {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(30), joined)
            .await
            .is_err()
        {
            eprintln!("some client tasks did not end within 30 s of the stop");
        }
    });
    let server_alive = server.alive();
    let samples = sampler.finish();
    drop(server);

    let stats = &shared.stats;
    let latency = shared.latency.lock().unwrap_or_else(|e| e.into_inner());
    let sent = stats.sent.load(Ordering::Relaxed);
    let answered = stats.answered.load(Ordering::Relaxed);
    let settled: Vec<u64> = samples
        .iter()
        .filter(|(at, _)| *at >= window_start.as_secs_f64())
        .map(|(_, kib)| *kib)
        .collect();
    let half = settled.len() / 2;
    let rss_growth_kib = if half > 0 {
        let first = settled[..half].iter().max().copied().unwrap_or(0);
        let second = settled[half..].iter().max().copied().unwrap_or(0);
        second as i64 - first as i64
    } else {
        0
    };
    let kib: Vec<u64> = samples.iter().map(|(_, kib)| *kib).collect();
    Ok(PhaseFigures {
        phase,
        settings: settings.clone(),
        window_s: window.as_secs_f64(),
        sent,
        answered,
        mismatched: stats.mismatched.load(Ordering::Relaxed),
        failed: stats.failed.load(Ordering::Relaxed),
        lost: sent.saturating_sub(answered),
        connect_failures: stats.connect_failures.load(Ordering::Relaxed),
        reconnects: stats.reconnects.load(Ordering::Relaxed),
        throughput: if window.is_zero() {
            0.0
        } else {
            answered_in_window as f64 / window.as_secs_f64()
        },
        p50_us: latency.value_at_quantile(0.5),
        p99_us: latency.value_at_quantile(0.99),
        p999_us: latency.value_at_quantile(0.999),
        max_us: latency.max(),
        rss_min_kib: kib.iter().min().copied().unwrap_or(0),
        rss_max_kib: kib.iter().max().copied().unwrap_or(0),
        rss_last_kib: kib.last().copied().unwrap_or(0),
        rss_growth_kib,
        rss_samples: samples,
        server_alive,
        server_cpu_percent,
        harness_cpu_percent,
        load_average,
        attackers: attack_stats
            .iter()
            .map(|stats| stats.figures(still_open[stats.kind as usize]))
            .collect(),
        errors: stats
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
    })
}

fn print_phase(figures: &PhaseFigures) {
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "{}: {:.0} echoes/s over {:.0} s; latency p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        figures.phase,
        figures.throughput,
        figures.window_s,
        ms(figures.p50_us),
        ms(figures.p99_us),
        ms(figures.p999_us),
        ms(figures.max_us)
    );
    println!(
        "  sent {}, answered {}, lost {}, mismatched {}, failed {}, connect failures {}, reconnects {}",
        figures.sent,
        figures.answered,
        figures.lost,
        figures.mismatched,
        figures.failed,
        figures.connect_failures,
        figures.reconnects
    );
    println!(
        "  server RSS min {} MiB, max {} MiB, last {} MiB, growth over the window {} MiB{}",
        figures.rss_min_kib / 1024,
        figures.rss_max_kib / 1024,
        figures.rss_last_kib / 1024,
        figures.rss_growth_kib / 1024,
        if figures.server_alive {
            ""
        } else {
            "; THE SERVER DIED"
        }
    );
    println!(
        "  CPU over the window: server {:.0}%, harness {:.0}% (of one core; 2 cores = 200%); load at start {}",
        figures.server_cpu_percent, figures.harness_cpu_percent, figures.load_average
    );
    for attack in &figures.attackers {
        let s = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} s"));
        println!(
            "  {:<15} x{:<4} opened {:>7}, connect failures {:>6}, closed by the server {:>7} (after min {}, median {}, max {}), open at the end {}, work {}",
            attack.kind.name(),
            attack.connections,
            attack.opened,
            attack.connect_failures,
            attack.closed_by_server,
            s(attack.closed_after_min_s),
            s(attack.closed_after_p50_s),
            s(attack.closed_after_max_s),
            attack.still_open,
            attack.work
        );
    }
    for error in figures.errors.iter().take(5) {
        println!("  client error: {error}");
    }
}

/// The pass/fail rules, over one or two phases.
fn judge(phases: &[PhaseFigures]) -> Verdict {
    let mut failures = Vec::new();
    for phase in phases {
        if phase.lost > 0 || phase.mismatched > 0 {
            failures.push(format!(
                "{}: {} echoes lost, {} mismatched",
                phase.phase, phase.lost, phase.mismatched
            ));
        }
        if !phase.server_alive {
            failures.push(format!("{}: the server died", phase.phase));
        }
        let first_half_max = phase
            .rss_max_kib
            .saturating_sub(phase.rss_growth_kib.max(0) as u64);
        let allowed = (16 * 1024).max(first_half_max / 10) as i64;
        if phase.rss_growth_kib > allowed {
            failures.push(format!(
                "{}: server RSS grew {} MiB between the window's halves (allowed {} MiB)",
                phase.phase,
                phase.rss_growth_kib / 1024,
                allowed / 1024
            ));
        }
    }
    let baseline = phases.iter().find(|p| p.phase == "baseline");
    let attack = phases.iter().find(|p| p.phase == "attack");
    let (mut p99_ratio, mut throughput_ratio) = (None, None);
    if let (Some(baseline), Some(attack)) = (baseline, attack) {
        let p99 = attack.p99_us as f64 / baseline.p99_us.max(1) as f64;
        let throughput = attack.throughput / baseline.throughput.max(f64::MIN_POSITIVE);
        if p99 > 2.0 {
            failures.push(format!("p99 under attack is {p99:.2}x the baseline's"));
        }
        if throughput < 0.5 {
            failures.push(format!(
                "throughput under attack is {throughput:.3}x the baseline's"
            ));
        }
        p99_ratio = Some(p99);
        throughput_ratio = Some(throughput);
    }
    Verdict {
        phase: "verdict",
        p99_ratio,
        throughput_ratio,
        pass: failures.is_empty(),
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_duration("10x").is_err());
    }
}
