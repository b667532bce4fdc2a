#include "fuzz/json_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json_text.h"

namespace paradiff {

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || std::filesystem::is_directory(path, ec))
    return Status::Error(path, path + ": cannot read (missing, a directory, or unreadable)");
  if (size > kMaxJsonFileBytes)
    return Status::Error(path,
                         path + ": larger than " + std::to_string(kMaxJsonFileBytes) + " bytes");
  std::ifstream in(path);
  if (!in) return Status::Error(path, path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = ParseJsonText(ss.str());
  if (j.is_discarded()) return Status::Error(path, path + ": malformed JSON");
  return j;
}

nlohmann::json ReadJsonOrNull(const std::string& path) {
  StatusOr<nlohmann::json> j = ReadJsonFile(path);
  return j.ok() ? j.value() : nlohmann::json(nullptr);
}

}  // namespace paradiff
