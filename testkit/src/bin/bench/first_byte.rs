//! `bench NEW --first-byte [OLD]`: one stream at a time (c=1), straight to the fake upstream,
//! through this build and through OLD, one request each in turn (the order rotating) so this
//! machine's drift falls on all of them alike. Reports the time to the first content byte, p50
//! and p99, and what each build adds over direct.
//!
//! Beside them, when `relay-floor` was built next to this binary, the two floors in the same
//! run: a TCP relay (the extra hop alone) and the least HTTP gateway on Baton's stack (axum,
//! hyper, reqwest, with no gateway work). What Baton adds above the second is its own.

use testkit::{Behavior, FakeUpstream};

use super::{pct, start_shared, start_shared_with, tempfile_dir, timed, SHARED_KEY};

pub(super) async fn first_byte_bench(new_bin: &str, old_bin: Option<&str>, n: usize) {
    let fake = FakeUpstream::start("bench").await;
    fake.unchecked_for_benchmarks();
    fake.always(Behavior::Ok);
    let dir = tempfile_dir();
    let key = SHARED_KEY;
    let mut targets = vec![(
        "direct".to_string(),
        format!("{}/chat/completions", fake.base_url()),
    )];
    let mut children = Vec::new();
    let baseline = std::env::var("BENCH_BASELINE").unwrap_or_else(|_| "baseline".into());
    // Each in a directory of its own whatever BENCH_BASELINE names (a label, not a path).
    for (name, sub, bin) in [
        ("this build", "this-build", Some(new_bin)),
        (baseline.as_str(), "baseline", old_bin),
    ] {
        let Some(bin) = bin else { continue };
        let (child, _, url) = start_shared(bin, &dir, sub, &fake);
        children.push(child);
        targets.push((name.to_string(), url));
    }
    // Where "this build" and the HTTP floor sit in `targets`, for Baton's own work.
    let this_build = 1;
    let mut http_floor = None;
    if let Some(floor) = floor_bin() {
        for (name, mode) in [("floor: TCP relay", "raw"), ("floor: HTTP relay", "http")] {
            let (child, _, url) = start_shared_with(
                &floor,
                &dir,
                &format!("floor-{mode}"),
                &fake,
                &[("RELAY_FLOOR", mode)],
            );
            children.push(child);
            if mode == "http" {
                http_floor = Some(targets.len());
            }
            targets.push((name.to_string(), url));
        }
    }
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let mut samples = vec![Vec::with_capacity(n); targets.len()];
    for i in 0..n + 200 {
        for k in 0..targets.len() {
            let t = (i + k) % targets.len();
            let (first, _) = timed(&client, &targets[t].1, key, true).await;
            // The first 200 of each warm the connections and caches up.
            if i >= 200 {
                samples[t].push(first.expect("a content chunk"));
            }
        }
    }
    report(&targets, &mut samples, n, this_build, http_floor);
    drop(children);
}

/// The table: each path's p50 and p99 and what it adds over direct (the first row), then Baton's
/// own work, this build over the HTTP floor, when the floors ran.
fn report(
    targets: &[(String, String)],
    samples: &mut [Vec<f64>],
    n: usize,
    this_build: usize,
    http_floor: Option<usize>,
) {
    println!("## Time to the first content byte, one stream at a time ({n} streams each)\n");
    println!("| path | p50 | p99 | added p50 | added p99 |\n|---|---|---|---|---|");
    let mut direct = (0.0, 0.0);
    let mut p50s = Vec::with_capacity(targets.len());
    for (t, (name, _)) in targets.iter().enumerate() {
        let s = &mut samples[t];
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let (p50, p99) = (pct(s, 0.5), pct(s, 0.99));
        p50s.push(p50);
        if t == 0 {
            direct = (p50, p99);
            println!("| {name} | {p50:.3} ms | {p99:.3} ms | | |");
        } else {
            println!(
                "| {name} | {p50:.3} ms | {p99:.3} ms | +{:.3} ms | +{:.3} ms |",
                p50 - direct.0,
                p99 - direct.1
            );
        }
    }
    if let Some(floor) = http_floor {
        println!(
            "\nBaton's own work (this build over the HTTP floor, p50): +{:.3} ms",
            p50s[this_build] - p50s[floor]
        );
    }
}

/// `relay-floor`, built beside this binary (scripts/bench builds both).
pub(super) fn floor_bin() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let floor = exe.with_file_name("relay-floor");
    floor
        .is_file()
        .then(|| floor.to_string_lossy().into_owned())
}
