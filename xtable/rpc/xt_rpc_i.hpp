/*
 * xt_rpc_i.hpp -- what the per-service C++ glue files share (internal).
 *
 * A service glue file (xt_rpc_mds.cpp, ...) builds its C API from three pieces:
 *   xt_rpc_invoke()  runs one call on a pooled connection and maps every
 *                    exception to a negative errno (invariants of xt_rpc.h);
 *   xt_rpc_fill_header() / xt_rpc_make_ctx()  carry ids and deadlines;
 *   xt_rpc_serve()   runs a processor on the fixed-thread server.
 * Its handler class derives from CommonGlue to answer ping like every service.
 */
#ifndef XT_RPC_I_HPP
#define XT_RPC_I_HPP

#include "xt_rpc.h"
#include "Common.h"

#include <functional>
#include <memory>
#include <string>

#include <thrift/TProcessor.h>
#include <thrift/protocol/TProtocol.h>

struct xt_rpc_out {
    std::string *s;
};

namespace pom {
namespace glue {

using ProtoPtr = std::shared_ptr<apache::thrift::protocol::TProtocol>;

/* Runs fn on a connection of p. fn performs exactly one Thrift call and
 * returns the reply's status (0 or -errno). Transport and protocol failures
 * become -errno; a stale pooled connection is retried once on a fresh one
 * with the same request id. */
int invoke(xt_rpc_pool *p, const xt_rpc_call *call,
           const std::function<int(const ProtoPtr &, const pom::rpc::ReqHeader &)> &fn);

/* One call of invoke_each: send writes its request, recv reads its reply
 * and returns the reply's status. */
struct Each {
    xt_rpc_pool *pool;
    const xt_rpc_call *call;
    std::function<void(const ProtoPtr &, const pom::rpc::ReqHeader &)> send;
    std::function<int(const ProtoPtr &)> recv;
};
/* n calls at once, each on its own connection: every request is sent,
 * then every reply read, so the servers work on them together (a server
 * keeps a reply its client has not read yet: xt_rpc.h invariant 4).
 * rcs[i] gets call i's answer as invoke's; a stale pooled connection is
 * retried once through invoke, same request id. */
void invoke_each(size_t n, const Each *each, int *rcs);

/* What the connection of the request being served proved (set by the
 * server thread before it runs the processor; read by make_ctx). */
extern thread_local int peer_role;
extern thread_local int32_t peer_fsid;

/* The context a handler sees for a request header. */
xt_rpc_ctx make_ctx(const pom::rpc::ReqHeader &h, int default_budget_ms);

/* Starts `proc` on a server as described by opts; see xt_rpc_serve_common. */
int serve(const xt_rpc_server_opts *opts,
          const std::shared_ptr<apache::thrift::TProcessor> &proc,
          xt_rpc_server **out);

/* The server's default budget, for make_ctx in handlers. */
int server_budget_ms(const xt_rpc_server_opts *opts);

/* Answers Common.ping through C ops; every service handler derives from it. */
class CommonGlue : virtual public pom::rpc::CommonIf {
public:
    CommonGlue(const xt_rpc_common_ops *ops, void *ctx, int budget_ms)
        : ops_(ops), ctx_(ctx), budget_ms_(budget_ms) {}
    void ping(pom::rpc::PingResp &resp, const pom::rpc::PingReq &req) override;

protected:
    const xt_rpc_common_ops *ops_;
    void *ctx_;
    int budget_ms_;
};

} // namespace glue
} // namespace pom

#endif
