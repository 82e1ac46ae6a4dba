#include "models/model_source.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/checkpoint.h"
#include "core/excerpt.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxSnapshotFiles = 4096;

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

std::string home_cache() {
  const std::string xdg = environment("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg;
  return (fs::path(environment("HOME").empty() ? "/root" : environment("HOME")) / ".cache").string();
}

// An ORG or NAME of a repo id: letters, digits, '-', '_', '.', not '.' or '..' (huggingface_hub's
// validate_repo_id, which also bounds the length at 96).
bool plain_repo_part(const std::string& part) {
  if (part.empty() || part.size() > 96 || part == "." || part == ".." || part.find("..") != std::string::npos)
    return false;
  for (char c : part)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

bool is_commit(const std::string& text) {
  if (text.size() != 40) return false;
  for (char c : text)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

std::string read_hf_ref(const std::string& file) {
  // At most 64 characters: a commit is 40, and a ref file is never read whole.
  std::ifstream in(file);
  std::string commit(64, '\0');
  in.read(commit.data(), std::streamsize(commit.size()));
  commit.resize(size_t(in.gcount()));
  commit = commit.substr(0, commit.find('\n'));
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
  return commit;
}

namespace {

std::string list_refs(const fs::path& repo) {
  std::string refs;
  std::error_code error;
  for (fs::recursive_directory_iterator it(repo / "refs", error), end; !error && it != end; it.increment(error))
    if (it->is_regular_file(error))
      refs += (refs.empty() ? "" : ", ") + fs::relative(it->path(), repo / "refs", error).string();
  return refs.empty() ? "none" : refs;
}

ModelSource from_hf_cache(const std::string& given, const std::string& id, bool bare) {
  ModelSource source;
  source.given = given;
  source.kind = "hf-hub";
  std::string repo = id, revision = "main";
  if (const auto at = id.find('@'); at != std::string::npos) {
    repo = id.substr(0, at);
    revision = id.substr(at + 1);
  }
  const auto slash = repo.find('/');
  const std::string org = slash == std::string::npos ? "" : repo.substr(0, slash);
  const std::string name = slash == std::string::npos ? repo : repo.substr(slash + 1);
  if (!plain_repo_part(name) || (slash != std::string::npos && !plain_repo_part(org)) ||
      name.find('/') != std::string::npos)
    throw CheckpointError("'" + excerpt(given) +
                          "' is not a Hugging Face repo id (ORG/NAME of letters, digits, '-', '_' and '.', no '..')");
  if (revision.empty() || revision.find("..") != std::string::npos || revision.front() == '/')
    throw CheckpointError("'" + excerpt(given) + "': the revision after '@' must be a branch, a tag or a commit");
  source.repo = repo;
  source.revision = revision;
  const auto [root, origin] = hf_hub_cache_root_and_origin();
  source.cache = root;
  const fs::path folder = fs::path(source.cache) / ("models--" + (org.empty() ? name : org + "--" + name));
  std::error_code error;
  if (!fs::is_directory(source.cache, error))  // a vanished disk, a mistyped variable, a file
    throw CheckpointError(given + ": there is no Hugging Face cache folder at " + source.cache + " (from " + origin +
                          (error ? ": " + error.message() : std::string()) +
                          "); attnscope never downloads: set HF_HUB_CACHE or HF_HOME to the cache that holds " + repo);
  if (!fs::is_directory(folder, error))
    throw CheckpointError(given + ": the Hugging Face cache at " + source.cache + " has no " +
                          folder.filename().string() +
                          " (attnscope never downloads: fetch it first with huggingface_hub, timm or transformers, or "
                          "set HF_HUB_CACHE / HF_HOME to the cache that holds it)");
  if (fs::is_regular_file(folder / "refs" / revision, error)) {
    source.commit = read_hf_ref((folder / "refs" / revision).string());
    if (!is_commit(source.commit))
      throw CheckpointError(given + ": " + (folder / "refs" / revision).string() + " does not hold a commit hash");
  } else if (is_commit(revision)) {
    source.commit = revision;
  } else {
    throw CheckpointError(given + ": revision '" + excerpt(revision) + "' is neither a ref of " + repo + " (" +
                          list_refs(folder) + ") nor a 40-digit commit");
  }
  const fs::path snapshot = folder / "snapshots" / source.commit;
  if (!fs::is_directory(snapshot, error))
    throw CheckpointError(given + ": " +
                          (revision == source.commit ? "commit " : "refs/" + revision + " names commit ") +
                          source.commit + ", whose snapshot " + snapshot.string() + " is not in the cache");
  for (fs::recursive_directory_iterator it(snapshot, error), end; !error && it != end; it.increment(error)) {
    if (source.files.size() >= kMaxSnapshotFiles)
      throw CheckpointError(given + ": the snapshot holds more than " + std::to_string(kMaxSnapshotFiles) + " files");
    std::error_code link_error;
    const bool link = it->is_symlink(link_error);
    if (it->is_directory(link_error)) continue;
    ModelSource::File file;
    file.name = fs::relative(it->path(), snapshot, link_error).string();
    if (link) {
      if (!fs::exists(it->path(), link_error))
        throw CheckpointError(given + ": " + it->path().string() + " is a broken link (its blob " +
                              fs::read_symlink(it->path(), link_error).string() +
                              " is missing): the download is incomplete; fetch it again");
      file.blob = fs::read_symlink(it->path(), link_error).filename().string();
    }
    file.size = fs::file_size(it->path(), link_error);
    source.files.push_back(file);
  }
  if (error) throw CheckpointError(given + ": cannot read the snapshot " + snapshot.string() + ": " + error.message());
  source.path = snapshot.string();
  if (bare)
    source.notes.push_back("'" + given + "' is no path here: read as hf-hub:" + id + " from the Hugging Face cache");
  source.notes.push_back("hf-hub " + repo + " revision " + revision + " = commit " + source.commit + " (" +
                         std::to_string(source.files.size()) + " files in " + snapshot.string() + ")");
  return source;
}

}  // namespace

std::string hf_hub_cache_root() { return hf_hub_cache_root_and_origin().first; }

std::pair<std::string, std::string> hf_hub_cache_root_and_origin() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (!environment(name).empty()) return {environment(name), name};
  if (!environment("HF_HOME").empty()) return {(fs::path(environment("HF_HOME")) / "hub").string(), "HF_HOME"};
  return {(fs::path(home_cache()) / "huggingface" / "hub").string(),
          environment("XDG_CACHE_HOME").empty() ? "the default, ~/.cache" : "XDG_CACHE_HOME"};
}

std::string torch_hub_checkpoints() {
  const std::string torch_home =
      environment("TORCH_HOME").empty() ? (fs::path(home_cache()) / "torch").string() : environment("TORCH_HOME");
  return (fs::path(torch_home) / "hub" / "checkpoints").string();
}

nlohmann::json ModelSource::to_json() const {
  nlohmann::json j = {{"given", given}, {"kind", kind}, {"path", path}};
  if (kind == "hf-hub") {
    j["repo"] = repo;
    j["revision"] = revision;
    j["commit"] = commit;
    j["cache"] = cache;
    nlohmann::json list = nlohmann::json::array();
    for (const File& file : files) {
      nlohmann::json entry = {{"name", file.name}, {"size", file.size}};
      if (!file.blob.empty()) entry["blob"] = file.blob;
      list.push_back(entry);
    }
    j["files"] = list;
  }
  return j;
}

std::string ModelSource::describe() const {
  std::ostringstream text;
  text << given;
  if (kind == "hf-hub") {
    text << "\nthe Hugging Face cache's " << repo << ", revision " << (revision.empty() ? "main" : revision)
         << ", commit " << commit << "\nin " << cache;
    for (const File& file : files) {
      text << "\n  " << file.name << "  " << std::fixed << std::setprecision(1) << double(file.size) / 1e6 << " MB";
      if (!file.blob.empty()) text << "  blob " << file.blob.substr(0, 16) << "...";
    }
  } else if (path != given) {
    text << "\n" << kind << ": " << path;
  }
  for (const std::string& note : notes) text << "\n" << note;
  return text.str();
}

ModelSource resolve_model_source(const std::string& given) {
  static const std::string kHub = "hf-hub:", kLocal = "local-dir:";
  if (given.rfind(kHub, 0) == 0) return from_hf_cache(given, given.substr(kHub.size()), false);
  ModelSource source;
  source.given = given;
  std::error_code error;
  if (given.rfind(kLocal, 0) == 0) {
    source.kind = "local-dir";
    source.path = given.substr(kLocal.size());
    if (!fs::exists(source.path, error)) throw CheckpointError(given + ": no such file or folder");
    return source;
  }
  source.kind = "path";
  source.path = given;
  if (fs::exists(given, error) || given.empty()) return source;
  // A bare ORG/NAME that is no path: the hub's cache, said.
  const auto slash = given.find('/');
  if (slash != std::string::npos && slash > 0 && given.find('/', slash + 1) == std::string::npos &&
      given.front() != '.' && given.find("..") == std::string::npos)
    return from_hf_cache(given, given, true);
  // A bare file name of torch.hub's (dinov2_vits14_pretrain.pth ...).
  if (given.find('/') == std::string::npos && given.size() > 4 &&
      (given.compare(given.size() - 4, 4, ".pth") == 0 || given.compare(given.size() - 3, 3, ".pt") == 0)) {
    const fs::path cached = fs::path(torch_hub_checkpoints()) / given;
    if (fs::is_regular_file(cached, error)) {
      source.kind = "torch-hub";
      source.path = cached.string();
      source.notes.push_back("'" + given + "' read from torch.hub's checkpoints: " + cached.string());
      return source;
    }
  }
  return source;  // the reader says what is missing, as for any path
}

std::string absolute_model_name(const std::string& given) {
  static const std::string kLocal = "local-dir:";
  std::error_code error;
  if (given.rfind(kLocal, 0) == 0) return kLocal + fs::absolute(given.substr(kLocal.size()), error).string();
  if (given.empty() || !fs::exists(given, error)) return given;
  return fs::absolute(given, error).string();
}

}  // namespace attnscope
