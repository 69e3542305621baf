// A folder of output files that is complete or absent (`cpsim run --dump DIR`), as OutputFile is for one file.
//
//   the files are written into a temporary sibling, DIR/../.NAME.cpsim-partial-PID, and commit() renames it to DIR
//   in one step (where DIR exists and holds files, each file is renamed into it instead, with SIGINT, SIGTERM and
//   SIGHUP held off until the last: metadata only, no byte written; where DIR exists but its folder is not
//   writable, the temporary is DIR/.cpsim-partial-PID and its files are renamed into DIR the same way)
//   a failure (a full disk, a file-size limit, an exception): the destructor removes the temporary and all in it
//   SIGINT, SIGTERM or SIGHUP while the files are written: remembered, and at the next check_interrupted() (between
//   files) the temporary is removed and the signal raised again, so the process ends as it would have
//   SIGKILL (or a power cut) leaves the temporary: its name says it is partial and names the process that wrote it;
//   the next OutputFolder for the same DIR removes the temporaries whose process is gone
#pragma once
#include <string>

namespace cpsim {

class OutputFolder {
 public:
  // Removes stale temporaries of DIR, makes a new one, and takes SIGINT, SIGTERM and SIGHUP (those not ignored)
  // until it is committed or destroyed. Error when the temporary cannot be made.
  explicit OutputFolder(std::string dir);
  ~OutputFolder();  // not committed: the temporary is removed; the signals' handlers are restored either way
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  // Where to write the file `name` now: inside the temporary.
  std::string file(const std::string& name) const;
  // A stop signal has arrived: removes the temporary and raises the signal again (Error if the process survives it).
  void check_interrupted();
  // Moves the files into DIR. Error (the temporary removed) when that fails.
  void commit();

  const std::string& dir() const { return dir_; }
  const std::string& temporary() const { return temp_; }
  // The temporary's name for DIR written by process `pid` (".NAME.cpsim-partial-PID", beside DIR).
  static std::string temporary_for(const std::string& dir, long pid);

 private:
  void remove_temporary();
  std::string dir_, temp_;
  bool inside_ = false;  // the temporary is inside DIR (DIR exists, its folder is not writable)
  bool done_ = false;
};

}  // namespace cpsim
