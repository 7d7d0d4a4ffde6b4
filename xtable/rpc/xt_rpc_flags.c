/*
 * xt_rpc_flags.c -- the command-line flags of the server limits, shared by
 * pom-r2, pom-mds and pom-mdsl so the three spell and check them alike.
 *
 * On the command line 0 turns a limit off; in struct xt_rpc_server_opts 0
 * means the default and < 0 off, so a flag's 0 is stored as -1.
 */
#include "xt_rpc.h"

#include "xt_daemon.h"

#include <errno.h>
#include <getopt.h>

int xt_rpc_server_flag(int code, const char *arg, struct xt_rpc_server_opts *o,
                       const char *prog)
{
    static const struct {
        const char *name;
        uint64_t max;
    } flags[] = {
        { "--max-clients", 1000000 },
        { "--input-budget", UINT64_C(1) << 40 },
        { "--output-budget", UINT64_C(1) << 40 },
        { "--idle-timeout-ms", 86400000 },
        { "--request-timeout-ms", 86400000 },
    };
    int i = code - XT_RPC_FLAG_BASE;
    if (i < 0 || i >= (int)(sizeof flags / sizeof flags[0]))
        return 0;
    uint64_t v;
    if (xt_parse_u64(arg, 0, flags[i].max, &v)) {
        fprintf(stderr, "%s: %s wants 0..%llu (0: no limit), got '%s'\n", prog, flags[i].name,
                (unsigned long long)flags[i].max, arg);
        return -EINVAL;
    }
    int64_t x = v ? (int64_t)v : -1;
    switch (i) {
    case 0: o->max_clients = (int)x; break;
    case 1: o->input_budget = x; break;
    case 2: o->output_budget = x; break;
    case 3: o->idle_timeout_ms = (int)x; break;
    default: o->request_timeout_ms = (int)x; break;
    }
    return 1;
}

void xt_rpc_server_flags_usage(FILE *f)
{
    fprintf(f,
            "  --max-clients N          connections served at once; more are closed at once\n"
            "                           (default 10000, at most the descriptor limit less 256)\n"
            "  --input-budget BYTES     unfinished requests buffered over all connections; a\n"
            "                           connection that would pass it is closed (default the\n"
            "                           larger of 256M and the largest frame)\n"
            "  --output-budget BYTES    replies queued for slow readers over all connections\n"
            "                           (default as --input-budget)\n"
            "  --idle-timeout-ms N      close connections idle this long (default 300000)\n"
            "  --request-timeout-ms N   close a connection whose request or reply is not through\n"
            "                           within N (default 30000); 0 turns any of these off\n");
}
