/*
 * xt_rpc_metrics.c -- the RPC families of a daemon's /metrics
 * (docs/metrics.md "Every daemon"): its server's connections and requests,
 * and the calls of every client pool of the process.
 */
#include "xt_metrics.h"
#include "xt_rpc.h"

#include <stdio.h>

void xt_rpc_metrics_put(struct xt_metrics_buf *b, const char *prefix, xt_rpc_server *s)
{
    char n[128];
#define NAME(suffix) (snprintf(n, sizeof n, "%s_rpc_" suffix, prefix), n)
    if (s) {
        struct xt_rpc_server_stats st;
        xt_rpc_server_stats(s, &st);
        xt_metrics_put_gauge(b, NAME("connections"), "RPC connections open now.",
                             (double)st.connections);
        xt_metrics_put_counter(b, NAME("connections_accepted_total"),
                               "RPC connections accepted.", st.accepted);
        xt_metrics_put_counter(b, NAME("connections_refused_total"),
                               "RPC connections closed at once: --max-clients reached.",
                               st.refused);
        xt_metrics_put_counter(b, NAME("requests_total"), "RPC requests served.", st.requests);
        xt_metrics_put_counter(b, NAME("malformed_requests_total"),
                               "RPC request frames that could not be decoded.", st.malformed);
    }
    struct xt_rpc_pool_stats ps;
    xt_rpc_pool_totals(&ps);
    xt_metrics_put_counter(b, NAME("client_calls_total"), "RPC calls made to other sites.",
                           ps.calls);
    xt_metrics_put_counter(b, NAME("client_errors_total"),
                           "RPC calls to other sites that returned an error.", ps.errors);
    xt_metrics_put_counter(b, NAME("client_timeouts_total"),
                           "RPC calls to other sites that timed out.", ps.timeouts);
    xt_metrics_put_counter(b, NAME("client_connects_total"),
                           "Connections opened to other sites.", ps.connects);
    xt_metrics_put_counter(b, NAME("client_connect_failures_total"),
                           "Connections to other sites that failed.", ps.connect_failures);
#undef NAME
}
