#include "common/util/flags.hpp"

#include <cstdlib>

#include "common/util/status.hpp"

namespace warp {

Flags& Flags::value(const std::string& name, std::string default_value, std::string help, bool repeatable) {
  order_.push_back(name);
  specs_[name] = {std::move(default_value), std::move(help), true, repeatable, {}, false};
  return *this;
}

Flags& Flags::boolean(const std::string& name, std::string help) {
  order_.push_back(name);
  specs_[name] = {"", std::move(help), false, false, {}, false};
  return *this;
}

void Flags::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      return;
    }
    if (arg.size() == 2 && arg[0] == '-' && arg[1] != '-') arg = "-" + arg;  // -k is --k
    if (arg.rfind("--", 0) != 0) throw Error("unexpected argument '" + arg + "'\n" + help_text());
    std::string name = arg.substr(2), inline_value;
    bool has_inline = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1), name = name.substr(0, eq), has_inline = true;
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) throw Error("unknown flag --" + name + "\n" + help_text());
    Spec& spec = it->second;
    if (spec.set && !spec.repeatable) throw Error("flag --" + name + " given twice");
    spec.set = true;
    if (!spec.takes_value) continue;
    if (has_inline) {
      spec.values.push_back(inline_value);
      continue;
    }
    if (i + 1 >= argc) throw Error("flag --" + name + " needs a value");
    spec.values.push_back(argv[++i]);
    while (spec.repeatable && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
      spec.values.push_back(argv[++i]);
  }
}

std::string Flags::help_text() const {
  std::string text = usage_ + "\n\nFlags:\n";
  for (const std::string& name : order_) {
    const Spec& spec = specs_.at(name);
    std::string left = "  --" + name + (spec.takes_value ? " VALUE" : "");
    if (left.size() < 26) left.resize(26, ' ');
    text += left + " " + spec.help;
    if (spec.takes_value && !spec.default_value.empty()) text += " (default: " + spec.default_value + ")";
    text += "\n";
  }
  text += "  --help                   this text\n";
  return text;
}

const std::string& Flags::get(const std::string& name) const {
  const Spec& spec = specs_.at(name);
  return spec.values.empty() ? spec.default_value : spec.values.back();
}

const std::vector<std::string>& Flags::all(const std::string& name) const { return specs_.at(name).values; }

bool Flags::is_set(const std::string& name) const { return specs_.at(name).set; }

double Flags::number(const std::string& name) const {
  const std::string& text = get(name);
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw Error("flag --" + name + ": '" + text + "' is not a number");
  return v;
}

uint64_t Flags::count(const std::string& name) const {
  const std::string& text = get(name);
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-') throw Error("flag --" + name + ": '" + text + "' is not a count");
  return v;
}

}  // namespace warp
