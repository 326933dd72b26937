#pragma once

#include <string>
#include <vector>

#include "deploy/partition/partition_problem.h"
#include "tools/plot.h"

namespace igb::deploy {

/// One FIFO server on a frame's path: a device running its stage, or one direction of a link.
struct PipelineServer {
  std::string name;
  bool link = false;
  /// Service time of the first frame and of every later one (a link's later frames may send
  /// differences instead of whole tensors), ms.
  double first_ms = 0, later_ms = 0;
  /// A link's propagation delay, added after the transmission without holding the link, ms.
  double latency_ms = 0;
  /// The device whose stage the server runs, or a link's sending device (-1: neither).
  int device = -1;
  /// A link of the chain: its index, and whether the server is its backward direction.
  int link_index = -1;
  bool backward = false;
  /// The machine whose cores the server's work runs on (an index into
  /// SimulationOptions::host_cores), or -1: its work needs no shared core.
  int host = -1;
  /// Of the service time, the ms at its start that are work on one of the host's cores (a
  /// stage: all of it; a link: its CPU, not the transmission), first frame and later ones; on a
  /// busy host they take longer.
  double cpu_first_ms = 0, cpu_later_ms = 0;
  /// CPU work a frame adds when it finds the server idle (its previous frame left before this
  /// one was ready, or it is the first): a process woken from sleep, its caches cold, ms. Part
  /// of the CPU share (of the service without a host).
  double idle_ms = 0;
  /// Idle time after which a frame pays all of idle_ms; after less, it pays in proportion (0: any
  /// idle time pays all), ms.
  double idle_full_ms = 0;
  /// CPU work a frame leaves behind on the host when it leaves the server (its process's work
  /// off the frame's path: a sender's call answered, its threads going back to sleep), ms: it
  /// shares the host's cores with the rest and holds neither the server nor the frame.
  double background_ms = 0;
};

/// How frames enter the pipeline.
struct SimulationOptions {
  /// Frames to send.
  int frames = 30;
  /// Frames per second arriving at the source; 0 sends them back to back (all waiting at time 0).
  double rate_fps = 0;
  /// Cores of each machine servers share (PipelineServer::host). Empty: every server runs on
  /// its own.
  std::vector<int> host_cores;
};

/// One frame's time on one server.
struct ServerSpan {
  int frame = 0, server = 0;
  double ready = 0, start = 0, end = 0;
};

struct ServerStats {
  std::string name;
  /// Busy time over the simulated span (first arrival to last completion).
  double utilisation = 0;
  /// Frames waiting for the server (ready, not started): the most at once, and the time average.
  int max_queue = 0;
  double mean_queue = 0;
};

struct SimulationResult {
  std::vector<double> arrival_ms, done_ms, latency_ms;
  std::vector<ServerSpan> spans;
  std::vector<ServerStats> servers;
  /// Last completion minus first arrival.
  double makespan_ms = 0;
  /// Frames over the makespan, and the steady rate between the first and the last completion.
  double throughput_fps = 0, steady_fps = 0;
  double mean_latency_ms = 0, max_latency_ms = 0;
};

/// Discrete-event simulation of frames through `servers` in order, each a FIFO server. A frame
/// becomes ready at a server at its arrival, or at the previous server's end plus that link's
/// latency; the server starts it when it is free. A server on a host runs its CPU share first,
/// sharing the host's cores with the other shares in progress there as an operating system
/// does (n shares on c cores each advance at min(1, c / n)), then the rest of its service. A
/// frame that finds its server idle adds the server's idle_ms to the CPU share; a frame leaving a
/// server leaves its background_ms of work on the host's cores.
SimulationResult simulate_pipeline(const std::vector<PipelineServer>& servers,
                                   const SimulationOptions& options);

/// The servers of a plan in a frame's order: each device from the source with work, each link
/// direction with bytes to send. `first` and `later` are the same model and chain with the bytes
/// of whole tensors and of frame differences (pass the same problem twice for whole tensors
/// only).
std::vector<PipelineServer> pipeline_servers(const PartitionProblem& first,
                                             const PartitionProblem& later,
                                             const Assignment& assignment);

/// The Gantt chart of a simulation: one row per server, one colour per frame.
tools::GanttChart gantt_chart(const std::vector<PipelineServer>& servers,
                              const SimulationResult& result, const std::string& title);

}  // namespace igb::deploy
