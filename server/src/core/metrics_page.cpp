#include "core/metrics_page.hpp"

#include "core/core.hpp"
#include "core/schedule_runner.hpp"
#include "hourglass/exposition.hpp"
#include "hourglass/metrics.hpp"

namespace hourglass::server::detail {

std::string core::metrics_page() {
  return metrics_cache.get([this] {
    const metrics_snapshot snapshot = jobs->stats().snapshot();
    std::string page;
    // render_prometheus's own estimate, and room for the daemon's families:
    // the page is written without growing.
    page.reserve(8192 + snapshot.handlers.size() * 2048 + opts.upstreams.size() * 256);
    exposition_writer w(page);
    render_prometheus(snapshot, w);
    store->write_metrics(w);
    schedules->write_metrics(w);
    upstreams->write_metrics(w);
    w.gauge("hourglass_http_connections_open", "Client connections open now.", connections->size());
    w.gauge("hourglass_http_connections_limit",
            "Connections beyond this are accepted and closed at once (--max-connections).", opts.max_connections);
    return page;
  });
}

}  // namespace hourglass::server::detail
