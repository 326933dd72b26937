// What the master makes of the workers' answers: a worker's Report as WorkerInfo (worker_report,
// declared in serve_master.h), a frame's Result added to a ServeResult, and the run's latency and
// throughput. Internal to deploy/serve/.
#pragma once

#include "deploy/serve/serve_master.h"
#include "deploy/serve/wire.h"

namespace igb::deploy {

/// A result for `n` frames, every per-frame field sized and empty.
ServeResult empty_result(int n);

/// Adds frame `done`'s outputs and what each stage did for it (`r`'s hops) to `out`.
void add_result(const proto::Result& r, int done, ServeResult& out);

/// Latency and throughput over the frames answered (not those dropped).
void summarise(ServeResult& out);

}  // namespace igb::deploy
