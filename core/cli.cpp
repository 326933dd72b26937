#include "core/cli.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/finite_number.h"

namespace igb {

nlohmann::json parse_model_args(const std::vector<std::string>& args) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError("--model-arg '" + a + "' is not KEY=VALUE");
    out[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return out;
}

namespace {

[[noreturn]] void refuse(const CLI::Option* opt, const std::string& limit,
                         const std::string& value);

// Every real option (CLI11's type FLOAT, one value or a list) of `app` and its sub-commands
// refuses values that are not finite numbers, whether given on the command line or in a config
// file.
void add_finite_checks(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name().find("FLOAT") == std::string::npos) continue;
    try {
      opt->get_validator("finite");
      continue;  // added by an earlier parse
    } catch (const CLI::OptionNotFound&) {
    }
    CLI::Validator finite(
        [opt](std::string& value) -> std::string {
          if (!finite_number_text(value)) refuse(opt, "a finite number", value);
          return "";
        },
        "", "finite");
    opt->check(finite);
  }
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) add_finite_checks(*sub);
}

void add_help_all(CLI::App& app) {
  if (app.get_help_all_ptr() == nullptr)
    app.set_help_all_flag("--help-all", "Print this help with every sub-command's options");
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) add_help_all(*sub);
}

}  // namespace

bool parse_command_line(CLI::App& app, int argc, char** argv, const LocateOption& locate) {
  add_help_all(app);
  add_finite_checks(app);
  const auto located = [&](const std::string& message) {
    return locate ? locate(message) : message;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return true;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return true;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::cout << app.help();
      return true;
    }
    throw InputError(located(e.what()) + " (see --help)");
  } catch (const InputError& e) {
    throw InputError(located(e.what()));
  }
  return false;
}

namespace {

namespace fs = std::filesystem;

// Shortest text of a limit: 1000000, 0.5, 1e-08.
std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

[[noreturn]] void refuse(const CLI::Option* opt, const std::string& limit,
                         const std::string& value) {
  throw InputError(opt->get_name() + " must be " + limit + ", not " +
                   (value.empty() ? std::string("''") : value));
}

}  // namespace

CLI::Option* int_range(CLI::Option* opt, int64_t min, int64_t max) {
  const bool no_max = max == std::numeric_limits<int64_t>::max();
  const std::string limit =
      no_max ? "an integer >= " + std::to_string(min)
             : "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  const std::string shown = no_max
                                ? ">= " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  // The Validator outlives this call inside the option; it refers to the option for its name.
  opt->check(CLI::Validator(
      [opt, min, max, limit](std::string& value) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
          refuse(opt, limit, value);
        return "";
      },
      shown));
  return opt;
}

CLI::Option* real_range(CLI::Option* opt, double min, double max, bool min_excluded) {
  const bool no_max = std::isinf(max);
  const std::string limit =
      no_max ? (min_excluded ? "> " : ">= ") + number_text(min)
             : (min_excluded ? "> " + number_text(min) + " and <= " + number_text(max)
                             : "between " + number_text(min) + " and " + number_text(max));
  opt->check(CLI::Validator(
      [opt, min, max, min_excluded, limit](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !std::isfinite(v) || v < min ||
            (min_excluded && v == min) || v > max)
          refuse(opt, limit, value);
        return "";
      },
      limit));
  return opt;
}

namespace {

// The nearest existing folder at or above `dir` (`dir` itself when it exists); InputError when
// what exists there is not a folder.
fs::path nearest_existing_folder(const std::string& option, const fs::path& path, fs::path dir) {
  for (;;) {
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const auto st = fs::status(dir, ec);
    if (st.type() == fs::file_type::not_found) {
      const fs::path up = dir.parent_path();
      if (up == dir || dir == ".") return dir;
      dir = up;
      continue;
    }
    if (ec)
      throw InputError(option + " " + path.string() + ": " + dir.string() + ": " + ec.message());
    if (!fs::is_directory(st))
      throw InputError(option + " " + path.string() + ": " + dir.string() +
                       " is a file, not a folder");
    return dir;
  }
}

void check_writable(const std::string& option, const fs::path& path, const fs::path& folder) {
  const auto refuse_folder = [&] {
    throw InputError(option + " " + path.string() + ": the folder " + folder.string() +
                     " is not writable");
  };
  if (::access(folder.c_str(), W_OK | X_OK) != 0) refuse_folder();
  // access() says yes to root everywhere, and to anyone on /proc and /sys: make a file there, the
  // way the output will be made, and remove it at once.
  std::string probe = (folder / ".igb-write-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) refuse_folder();
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void check_output_folder(const std::string& option, const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() != fs::file_type::not_found && ec)
    throw InputError(option + " " + path.string() + ": " + ec.message());
  if (fs::exists(st) && !fs::is_directory(st))
    throw InputError(option + " " + path.string() + " is a file, not a folder");
  check_writable(option, path, nearest_existing_folder(option, path, path));
}

void check_output_file(const std::string& option, const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() != fs::file_type::not_found && ec)
    throw InputError(option + " " + path.string() + ": " + ec.message());
  if (fs::is_directory(st))
    throw InputError(option + " " + path.string() + " is a folder, not a file");
  check_writable(option, path, nearest_existing_folder(option, path, path.parent_path()));
}

}  // namespace igb
