// `paradiff import deepspeed DS_CONFIG.json [--out CONFIG.json]` and `paradiff import megatron
// ARGS_FILE | -- ARGS... [--out CONFIG.json]`: a paradiff config from a DeepSpeed config or from
// pretrain_gpt.py arguments (targets/translate.h). Prints the config (or writes --out) and the
// import's INFO / WARNING lines (what was scaled, what "auto" took, each key or argument without a
// counterpart). Exit 2 on bad input, naming the key or argument.
#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/budget.h"
#include "core/config_json.h"
#include "core/exit_codes.h"
#include "fuzz/json_file.h"
#include "targets/translate.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

namespace {

constexpr const char* kUsage =
    "ERROR: usage: paradiff import deepspeed DS_CONFIG.json [--out CONFIG.json]\n"
    "       paradiff import megatron ARGS_FILE [--out CONFIG.json]\n"
    "       paradiff import megatron [--out CONFIG.json] -- ARGS...\n";

bool ReadText(const std::string& path, std::string& text) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  text = ss.str();
  return static_cast<bool>(f);
}

// The arguments of a launch command as written in a shell script: backslash-newlines join lines,
// '#' starts a comment, quotes group; tokens up to the last one naming a .py script (the
// launcher and its own flags) are dropped. A $VARIABLE is an error: its value is not here.
StatusOr<std::vector<std::string>> ShellArgs(const std::string& text) {
  std::vector<std::string> tokens;
  std::string cur;
  bool in_token = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quote) {
      if (ch == quote)
        quote = 0;
      else
        cur += ch;
      continue;
    }
    if (ch == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (ch == '#' && !in_token) {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(ch))) {
      if (in_token) tokens.push_back(cur), cur.clear(), in_token = false;
      continue;
    }
    in_token = true;
    if (ch == '"' || ch == '\'')
      quote = ch;
    else
      cur += ch;
  }
  if (quote) return Status::Error("", "config: an unclosed quote in the arguments");
  if (in_token) tokens.push_back(cur);
  size_t from = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.size() > 3 && t.compare(t.size() - 3, 3, ".py") == 0) from = i + 1;
  }
  std::vector<std::string> args(tokens.begin() + static_cast<std::ptrdiff_t>(from), tokens.end());
  Status st;
  for (const std::string& a : args)
    if (a.find('$') != std::string::npos)
      st.Add(a, a + ": a shell variable; write its value (the import does not run the script)");
  if (!st.ok()) return st;
  return args;
}

}  // namespace

int CmdImport(const Args& args) {
  const std::vector<std::string>& pos = args.positional;
  const bool deepspeed = pos.size() == 2 && pos[0] == "deepspeed";
  const bool megatron = pos.size() >= 2 && pos[0] == "megatron";
  if (!deepspeed && !megatron) {
    std::cerr << kUsage;
    return kExitBadInput;
  }
  std::string source = pos[1];
  StatusOr<ImportResult> r = Status::Error("", "");
  if (deepspeed) {
    const StatusOr<nlohmann::json> ds = ReadJsonFile(source);
    if (!ds.ok()) {
      std::cerr << "ERROR: " << ds.status().ToString() << "\n";
      return kExitBadInput;
    }
    r = ImportDeepSpeed(ds.value(), Config{});
  } else {
    std::vector<std::string> argv(pos.begin() + 1, pos.end());
    if (argv.size() == 1 && argv[0].rfind("--", 0) != 0) {  // an arguments file
      std::string text;
      if (!ReadText(source, text)) {
        std::cerr << "ERROR: " << source << ": not a readable file\n";
        return kExitBadInput;
      }
      StatusOr<std::vector<std::string>> parsed = ShellArgs(text);
      if (!parsed.ok()) {
        for (const auto& e : parsed.status().errors())
          std::cerr << "ERROR: " << source << ": " << e.message << "\n";
        return kExitBadInput;
      }
      argv = parsed.value();
    } else {
      source = "arguments";
    }
    r = ImportMegatron(argv, Config{});
  }
  if (r.ok()) {
    for (const ImportMessage& m : r.value().messages)
      std::cerr << (m.level == ImportMessage::kWarning ? "WARNING: " : "INFO: ") << source << ": "
                << m.text << "\n";
  }
  const Status ok = r.ok() ? CheckConfig(r.value().config, ResourceBudget{}) : r.status();
  if (!ok.ok()) {
    for (const auto& e : ok.errors()) std::cerr << "ERROR: " << source << ": " << e.message << "\n";
    return kExitBadInput;
  }
  return EmitText(args.out, WriteConfig(r.value().config));
}

}  // namespace paradiff
