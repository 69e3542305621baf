// Output that is complete or absent, never half-written, and output paths checked before any work starts.
//
//   OutputFile          a file written under a temporary name in its own folder (".run.json.XXXXXX") and renamed
//                       over its name by commit() once every byte is written and closed; any failure (a full disk, a
//                       file-size limit) throws Error naming the file and the reason, and the temporary is removed, so
//                       no truncated or empty file is ever left under the final name
//   check_output_file   before a run: UsageError (exit 2) when --flag PATH cannot be written (no such folder, a folder
//   check_output_folder of that name, not writable, not a regular file) so that a bad path costs one line, not a run
//   check_distinct      the same path given for two outputs (or an output over an input) is refused
//   flush_stdout        standard output flushed and checked: a failed write (a full disk, /dev/full) becomes one line
//                       on stderr and a nonzero exit instead of a silent exit 0
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cpsim {

class OutputFile {
 public:
  explicit OutputFile(std::string path);  // Error when the temporary cannot be made
  ~OutputFile();                          // not committed: the temporary is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Closes and renames the temporary over the path.
  void commit();
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, temp_;
  int fd_ = -1;
};

// The whole of `text` as the file `path` (OutputFile).
void write_file(const std::string& path, std::string_view text);

// --flag PATH will be a file: its folder exists and is writable, PATH is not a folder, and if it exists it is a
// regular file this process may replace.
void check_output_file(const std::string& flag, const std::string& path);
// --flag DIR will be a folder of files: DIR is a writable folder, or does not exist and its parent is writable.
void check_output_folder(const std::string& flag, const std::string& dir);

// (flag, path) of every output and input of a command: UsageError when two name the same file.
void check_distinct(const std::vector<std::pair<std::string, std::string>>& paths);

// Flushes std::cout and stdout. On failure prints "<program>: error: cannot write the output (<reason>)" on stderr
// and returns false.
bool flush_stdout(const std::string& program);

}  // namespace cpsim
