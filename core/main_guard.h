#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace igb {

/// Runs a driver's body, catching every error once: InputError (and usage errors) and a folder or
/// file that cannot be made or written (std::filesystem's errors, in our words) print one line
/// "<program>: error: <message>" and return 2; anything else prints one line and returns 1.
/// Installs install_interrupt_cleanup() first.
int guarded_main(const char* program, const std::function<int()>& body);

/// A std::filesystem error in our words: "cannot create directories /a/b: Permission denied".
std::string filesystem_message(const std::filesystem::filesystem_error& e);

/// Installs SIGINT and SIGTERM handlers that remove the temporary files of atomic writes in flight
/// (core/fs.h) and then let the signal end the process as it would have (default action, same exit
/// status). A signal the process was started with ignored (`nohup`, background jobs) stays ignored.
void install_interrupt_cleanup();

}  // namespace igb
