// A small command-line parser: declared flags only, each `--name value` or `--name` (boolean),
// repeated values collected, unknown flags and missing values reported with the usage text.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace warp {

class Flags {
 public:
  Flags(std::string usage) : usage_(std::move(usage)) {}
  // Declares a flag taking a value (`repeatable`: may be given several times or with several
  // values until the next flag), or a boolean switch.
  Flags& value(const std::string& name, std::string default_value, std::string help, bool repeatable = false);
  Flags& boolean(const std::string& name, std::string help);

  // Parses argv[first..]; throws Error with the reason. --help sets help_requested().
  void parse(int argc, char** argv, int first = 1);
  bool help_requested() const { return help_; }
  std::string help_text() const;

  const std::string& get(const std::string& name) const;
  const std::vector<std::string>& all(const std::string& name) const;
  bool is_set(const std::string& name) const;
  double number(const std::string& name) const;   // throws Error naming the flag
  uint64_t count(const std::string& name) const;  // non-negative integer

 private:
  struct Spec {
    std::string default_value;
    std::string help;
    bool takes_value = true;
    bool repeatable = false;
    std::vector<std::string> values;
    bool set = false;
  };
  std::string usage_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  bool help_ = false;
};

}  // namespace warp
