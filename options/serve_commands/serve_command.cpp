// igb-serve: the worker, master and client programs of a serving chain (docs/serving.md).
#include "options/serve_commands/serve_command.h"

#include <CLI/CLI.hpp>

#include <mutex>

#include "compress/scheduler.h"
#include "core/cli.h"
#include "core/error.h"
#include "deploy/serve/link_emulation.h"
#include "models/model.h"

namespace igb::options {

// Each command's file defines its adder.
void add_worker_command(Registry<ToolCommandSpec>& r);
void add_master_command(Registry<ToolCommandSpec>& r);
void add_client_command(Registry<ToolCommandSpec>& r);

Registry<ToolCommandSpec>& serve_command_registry() {
  static Registry<ToolCommandSpec> registry("command");
  return registry;
}

void register_builtin_serve_commands() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = serve_command_registry();
    add_worker_command(r);
    add_master_command(r);
    add_client_command(r);
    r.freeze();
  });
}

void add_security_options(CLI::App& sub, SecurityOptions& security) {
  sub.add_option("--tls-cert", security.files.cert,
                 "This process's certificate (PEM), signed by --tls-ca; with --tls-key and "
                 "--tls-ca every connection is mutual TLS (docs/serving.md#security)");
  sub.add_option("--tls-key", security.files.key, "The private key of --tls-cert (PEM)");
  sub.add_option("--tls-ca", security.files.ca,
                 "The CA certificate (PEM) every peer's certificate must be signed by");
  sub.add_flag("--insecure", security.insecure,
               "Without TLS, listen on an address beyond loopback anyway: anyone who reaches "
               "the port controls this process");
}

void apply_security_options(const SecurityOptions& security) {
  deploy::set_transport_security(security.files, security.insecure);
}

void add_link_options(CLI::App& sub, deploy::LinkEmulation& link, const std::string& to) {
  sub.add_option(
         "--link-bandwidth", link.bandwidth_mb_s,
         "Emulate a link of this many MB/s (10^6 bytes) to " + to + " (0: as fast as the network)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--link-latency", link.latency_ms,
                 "Emulate this many ms of latency per message to " + to)
      ->check(CLI::NonNegativeNumber);
}

int serve_main(int argc, char** argv) {
  models::register_builtin_models();
  compress::register_builtin_compression();
  register_builtin_serve_commands();
  CLI::App app("The serving chain: stage workers over gRPC and the master that feeds them.",
               "igb-serve");
  ToolCommandSet commands(app, serve_command_registry());
  commands.check_command_name(argc, argv);
  if (parse_command_line(app, argc, argv)) return kExitOk;
  return commands.run();
}

}  // namespace igb::options
