// Command lines into values, for the cpsim command and the lessons alike: nothing given is silently ignored, and
// every mistake is one UsageError line that names the flag and what it takes.
//
//   a stray argument           "cpsim run takes no positional argument (got 'extra'); every input is a flag, see
//                              `cpsim run --help`"
//   an unknown flag            Boost's "unrecognised option '--sequence'", with the help to see
//   a value out of its type    "--ranks 99999999999 is too large (at most 2147483647)"; "--heads 'x' is not a
//                              whole number"; "--timeout 1e999 is too large"
//   an empty value             "--trace got an empty value; name a file"
// parse() also tells the program's flag names (flag_names.hpp) which flags the program offers, so that the errors of
// shared code are worded in them.
#pragma once
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cpsim::cli {

namespace po = boost::program_options;

// cpsim run's name of a flag -> this program's name for it ({"seq", "seqs"} in `cpsim bench strategies`).
using FlagAliases = std::map<std::string, std::string>;

// Parses args against desc (plus --help) into vm for the program `program` ("cpsim run", "lesson_02_ulysses").
// Returns false when --help was asked for (the usage and options are printed to stdout). positional: the
// arguments the program takes without a flag (null: none).
bool parse_program(const std::string& program, const po::options_description& desc,
                   const std::vector<std::string>& args, po::variables_map& vm, const FlagAliases& aliases = {},
                   const po::positional_options_description* positional = nullptr);

// parse_program for `cpsim <command>`.
bool parse(const std::string& command, const po::options_description& desc, const std::vector<std::string>& args,
           po::variables_map& vm, const FlagAliases& aliases = {});

// "ring,ulysses" -> {"ring", "ulysses"}: the entries of a comma list flag --`flag`. UsageError for an empty entry
// ("ring,,ulysses", "16K,", ""), naming the flag, the entry and the list without it.
std::vector<std::string> split_list(const std::string& flag, const std::string& text);

// "64M" -> 67108864: a whole number with an optional K, M, G or T (powers of 1024). UsageError naming the flag for
// anything else (a sign, spaces; a fraction or an exponent "is not a whole number") and "too large for a size" past
// 2^64 - 1. Every size flag takes it: the problem table's (--seq, --batch, --heads, ...), predict's and layout's.
std::size_t parse_size(const std::string& flag, const std::string& text);
// parse_size for a count held as int64 (a memory limit, a sequence length): "too large" past 2^63 - 1.
std::int64_t parse_size64(const std::string& flag, const std::string& text);
// The value of a size flag --`flag` (--seq 4K): held as text by the parser, turned into *value by parse_size64 when
// the command line is notified, so a wrong one is one UsageError line naming the flag.
po::typed_value<std::string>* size_value(const std::string& flag, std::int64_t* value);
// A size flag's help: `text` and the suffixes the flag takes.
std::string size_help(const std::string& text);

// Seconds as a wait timeout: finite, at least a millisecond and at most kMaxTimeoutSeconds ("--timeout 1e300 is too
// large (at most 1000000 s)").
inline constexpr double kMaxTimeoutSeconds = 1e6;
std::chrono::milliseconds parse_timeout(const std::string& flag, double seconds);

}  // namespace cpsim::cli
