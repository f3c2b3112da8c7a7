//! Counters for `/metrics`.

use std::sync::{Arc, Mutex};

/// Counters for `/metrics` (Prometheus text format): tool calls by tool and outcome, their
/// latency as a histogram, and the MCP sessions alive.
#[derive(Debug, Default)]
pub struct Metrics {
    calls: Mutex<std::collections::BTreeMap<String, ToolStats>>,
    sessions: std::sync::atomic::AtomicI64,
    /// HTTP requests refused before reaching a tool, by status code.
    refusals: Mutex<std::collections::BTreeMap<u16, u64>>,
}

#[derive(Debug, Default, Clone)]
struct ToolStats {
    ok: u64,
    error: u64,
    /// Counts per bucket of [`BUCKETS`] (not cumulative), plus one for larger.
    buckets: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
}

/// Latency bucket bounds, seconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 10.0];

impl ringfence_core::CallMetrics for Metrics {
    fn record_call(&self, tool: &str, ok: bool, seconds: f64) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let st = calls.entry(tool.to_owned()).or_default();
        if ok {
            st.ok += 1;
        } else {
            st.error += 1;
        }
        let i = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        st.buckets[i] += 1;
        st.sum_seconds += seconds;
    }
}

impl Metrics {
    /// Counts an HTTP request refused with `status` (401, 403, 404, 413, 429, 503).
    pub(crate) fn refused(&self, status: u16) {
        *self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(status)
            .or_default() += 1;
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut out = String::new();
        out.push_str("# HELP ringfence_tool_calls_total Tool calls by tool and outcome.\n");
        out.push_str("# TYPE ringfence_tool_calls_total counter\n");
        for (tool, st) in &calls {
            let _ = writeln!(
                out,
                "ringfence_tool_calls_total{{tool=\"{tool}\",outcome=\"ok\"}} {}",
                st.ok
            );
            let _ = writeln!(
                out,
                "ringfence_tool_calls_total{{tool=\"{tool}\",outcome=\"error\"}} {}",
                st.error
            );
        }
        out.push_str("# HELP ringfence_tool_call_duration_seconds Tool call latency.\n");
        out.push_str("# TYPE ringfence_tool_call_duration_seconds histogram\n");
        for (tool, st) in &calls {
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += st.buckets[i];
                let _ = writeln!(
                    out,
                    "ringfence_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let total = st.ok + st.error;
            let _ = writeln!(
                out,
                "ringfence_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {total}"
            );
            let _ = writeln!(
                out,
                "ringfence_tool_call_duration_seconds_sum{{tool=\"{tool}\"}} {}",
                st.sum_seconds
            );
            let _ = writeln!(
                out,
                "ringfence_tool_call_duration_seconds_count{{tool=\"{tool}\"}} {total}"
            );
        }
        out.push_str(
            "# HELP ringfence_http_refusals_total HTTP requests refused before any tool ran, by status.\n",
        );
        out.push_str("# TYPE ringfence_http_refusals_total counter\n");
        let refusals = self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (status, n) in refusals {
            let _ = writeln!(
                out,
                "ringfence_http_refusals_total{{status=\"{status}\"}} {n}"
            );
        }
        out.push_str("# HELP ringfence_active_sessions MCP sessions alive.\n");
        out.push_str("# TYPE ringfence_active_sessions gauge\n");
        let _ = writeln!(
            out,
            "ringfence_active_sessions {}",
            self.sessions.load(std::sync::atomic::Ordering::Relaxed)
        );
        out
    }

    /// Counts a session alive until the returned guard (held by every clone of its server)
    /// is dropped.
    pub fn session(self: &Arc<Self>) -> Arc<SessionGuard> {
        self.sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(SessionGuard(self.clone()))
    }
}

/// Keeps a session counted in [`Metrics`] while it lives.
#[derive(Debug)]
pub struct SessionGuard(Arc<Metrics>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0
            .sessions
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use ringfence_core::CallMetrics as _;

    #[test]
    fn metrics_render_counts_and_histograms() {
        let m = std::sync::Arc::new(crate::Metrics::default());
        let guard = m.session();
        m.record_call("read_file", true, 0.002);
        m.record_call("read_file", false, 3.0);
        let text = m.render();
        assert!(text.contains("ringfence_tool_calls_total{tool=\"read_file\",outcome=\"ok\"} 1"));
        assert!(
            text.contains("ringfence_tool_calls_total{tool=\"read_file\",outcome=\"error\"} 1")
        );
        assert!(text.contains(
            "ringfence_tool_call_duration_seconds_bucket{tool=\"read_file\",le=\"0.0025\"} 1"
        ));
        assert!(text.contains(
            "ringfence_tool_call_duration_seconds_bucket{tool=\"read_file\",le=\"+Inf\"} 2"
        ));
        assert!(text.contains("ringfence_active_sessions 1"));
        m.refused(429);
        m.refused(429);
        assert!(
            m.render()
                .contains("ringfence_http_refusals_total{status=\"429\"} 2")
        );
        drop(guard);
        assert!(m.render().contains("ringfence_active_sessions 0"));
    }
}
