// A fuzz loop for the targets of tests/fuzz/ where libFuzzer is not linked (gcc; CI's ASan+UBSan
// build): the target's seeds, then inputs made from them by a fixed-seed random walk of
// mutations (bit flips, bytes and little-endian integers set to edge values, inserts, deletes,
// duplicated ranges, truncation, splices of two inputs, dictionary tokens), for --seconds or
// --runs, each through LLVMFuzzerTestOneInput. A finding is a sanitizer report or a crash (the
// process dies: the ctest fails); files named on the command line are replayed first (a
// libFuzzer crash file, say). Exit 1 when a seed is rejected (the target would then fuzz
// nothing but its error paths).
// Usage: fuzz_X [--seconds S] [--runs N] [--seed K] [FILE...]
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <exception>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

// AddressSanitizer's hook for its own reports (declared weak: absent from plain builds).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace flashserve::fuzz {
namespace {
int64_t g_accepted = 0, g_rejected = 0;
}  // namespace

void note(bool accepted) { ++(accepted ? g_accepted : g_rejected); }

namespace {

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<std::string> dict) : rng_(seed), dict_(std::move(dict)) {}

  // One to four mutations of `s` (other: a second input to splice from).
  void mutate(std::string& s, const std::string& other) {
    const int n = 1 + static_cast<int>(below(4));
    for (int i = 0; i < n; ++i) one(s, other);
  }

 private:
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  void put_le(std::string& s, size_t at, uint64_t v, int bytes) {
    for (int b = 0; b < bytes && at + b < s.size(); ++b) s[at + b] = static_cast<char>(v >> (8 * b));
  }

  void one(std::string& s, const std::string& other) {
    static const uint64_t kEdges[] = {0,          1,          2,          0x7f,        0x80,        0xff,
                                      0x7fff,     0x8000,     0xffff,     0x7fffffff,  0x80000000u, 0xffffffffu,
                                      0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
                                      0xffffffffffffffffull};
    switch (below(10)) {
      case 0:  // flip a bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:  // a byte to an edge value
        if (!s.empty()) s[below(s.size())] = static_cast<char>(kEdges[below(6)]);
        break;
      case 2:  // a 4- or 8-byte little-endian integer to an edge value (lengths, counts, offsets)
        if (!s.empty()) put_le(s, below(s.size()), kEdges[below(std::size(kEdges))], below(2) ? 4 : 8);
        break;
      case 3: {  // insert random bytes
        std::string ins(1 + below(16), '\0');
        for (char& c : ins) c = static_cast<char>(below(256));
        s.insert(below(s.size() + 1), ins);
        break;
      }
      case 4: {  // delete a range
        if (s.empty()) break;
        const size_t at = below(s.size());
        s.erase(at, 1 + below(std::min<size_t>(64, s.size() - at)));
        break;
      }
      case 5: {  // duplicate a range elsewhere
        if (s.empty()) break;
        const size_t at = below(s.size()), len = 1 + below(std::min<size_t>(256, s.size() - at));
        const std::string piece = s.substr(at, len);
        s.insert(below(s.size() + 1), piece);
        break;
      }
      case 6:  // truncate
        s.resize(below(s.size() + 1));
        break;
      case 7: {  // splice: a head of one, a tail of the other
        const size_t a = below(s.size() + 1), b = below(other.size() + 1);
        s = s.substr(0, a) + other.substr(b);
        break;
      }
      case 8:  // a dictionary token, inserted or written over
        if (!dict_.empty()) {
          const std::string& t = dict_[below(dict_.size())];
          const size_t at = below(s.size() + 1);
          if (below(2)) s.insert(at, t);
          else s.replace(at, std::min(t.size(), s.size() - at), t);
        }
        break;
      default:  // a run of one byte (long strings, deep nesting)
        s.insert(below(s.size() + 1), std::string(1 + below(512), dict_.empty() || below(2) ? '[' : dict_[0][0]));
        break;
    }
    if (s.size() > (4u << 20)) s.resize(4u << 20);  // keep inputs bounded
  }

  std::mt19937_64 rng_;
  std::vector<std::string> dict_;
};

// The input being run, written to fuzz-crash-<pid>.bin when the process dies on it (an uncaught
// exception, a signal, a sanitizer report), so the finding can be replayed: fuzz_X that-file.
const std::string* g_current = nullptr;
void dump_current() {
  if (g_current == nullptr) return;
  char path[64];
  std::snprintf(path, sizeof path, "fuzz-crash-%d.bin", static_cast<int>(getpid()));
  if (FILE* f = std::fopen(path, "wb")) {
    std::fwrite(g_current->data(), 1, g_current->size(), f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz: the input (%zu bytes) is in %s\n", g_current->size(), path);
  }
  g_current = nullptr;
}
void on_signal(int sig) {
  dump_current();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool run_one(const std::string& s) {
  const int64_t before = g_accepted;
  g_current = &s;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  g_current = nullptr;
  return g_accepted > before;
}

}  // namespace
}  // namespace flashserve::fuzz

int main(int argc, char** argv) {
  using namespace flashserve::fuzz;
  double seconds = 5;
  int64_t runs = -1;
  uint64_t seed = 1;
  std::vector<std::string> files;
  std::set_terminate([] {
    std::fprintf(stderr, "fuzz: terminate (an uncaught exception)\n");
    dump_current();
    std::abort();
  });
  // The handlers run on a stack of their own: a stack overflow (deep recursion) is a finding too.
  static std::vector<char> alt_stack(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  sigaltstack(&ss, nullptr);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK;
    sigaction(sig, &sa, nullptr);
  }
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(dump_current);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::atoll(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a.rfind("--", 0) == 0) { std::fprintf(stderr, "usage: %s [--seconds S] [--runs N] [--seed K] [FILE...]\n", argv[0]); return 2; }
    else files.push_back(a);
  }
  for (const std::string& f : files) {  // replays
    std::ifstream in(f, std::ios::binary);
    const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    run_one(s);
    std::printf("replayed %s (%zu bytes)\n", f.c_str(), s.size());
  }
  const std::vector<std::string> corpus = seeds();
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (!run_one(corpus[i])) {
      std::fprintf(stderr, "seed %zu (%zu bytes) was rejected: the target or its seeds are broken\n", i, corpus[i].size());
      return 1;
    }
  }
  Mutator m(seed, dictionary());
  std::mt19937_64 pick(seed ^ 0x9e3779b97f4a7c15ull);
  const auto start = std::chrono::steady_clock::now();
  std::string walk = corpus[0];
  int64_t n = 0;
  for (;; ++n) {
    if (runs >= 0 ? n >= runs
                  : (n % 64 == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds))
      break;
    // Half the inputs from a fresh seed, half continuing the walk (deeper chains of mutations).
    if (pick() % 2 == 0 || walk.empty()) walk = corpus[pick() % corpus.size()];
    m.mutate(walk, corpus[pick() % corpus.size()]);
    if (!run_one(walk) && pick() % 4 != 0) walk.clear();  // walk on from accepted inputs, mostly
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu seeds, %lld mutated inputs in %.1f s (%.0f/s), %lld accepted, %lld rejected, seed %llu\n",
              argv[0], corpus.size(), static_cast<long long>(n), took, n / std::max(took, 1e-9),
              static_cast<long long>(g_accepted), static_cast<long long>(g_rejected), static_cast<unsigned long long>(seed));
  return 0;
}
