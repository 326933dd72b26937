#pragma once

#include <string>

#include "core/registry.h"
#include "deploy/serve/transport_security.h"
#include "options/tool_commands/tool_command.h"

namespace igb::deploy {
struct LinkEmulation;
}

namespace igb::options {

/// The whole of `igb-serve worker|master|client ...` (docs/serving.md). Returns the exit code;
/// throws on errors (InputError → exit 2, a failed chain → exit 1).
int serve_main(int argc, char** argv);

/// The igb-serve commands, by name (filled by register_builtin_serve_commands()); the same shape
/// as igb-tools' registry, one file a command under options/serve_commands/.
Registry<ToolCommandSpec>& serve_command_registry();

/// Registers every igb-serve command; idempotent.
void register_builtin_serve_commands();

/// --tls-cert, --tls-key, --tls-ca and --insecure: how a command's connections are secured.
struct SecurityOptions {
  deploy::TlsFiles files;
  bool insecure = false;
};
void add_security_options(CLI::App& sub, SecurityOptions& security);
/// Makes them the process's (deploy::set_transport_security); InputError on a bad file.
void apply_security_options(const SecurityOptions& security);

/// --link-bandwidth and --link-latency of an emulated link to `to` ("the next worker").
void add_link_options(CLI::App& sub, deploy::LinkEmulation& link, const std::string& to);

}  // namespace igb::options
