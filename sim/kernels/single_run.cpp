#include "sim/kernels/single_run.hpp"

#include <time.h>

#include <chrono>

#include "sim/kernels/host_io.hpp"

namespace cpsim {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

SingleRun run_single_device(Device& dev, const AttentionProblem& p, DType dtype, bool backward) {
  const AttentionShape& sh = p.shape;
  SingleRun r;
  {
    const Dims qd{sh.B, sh.Sq, sh.Nq, sh.D}, kd{sh.B, sh.Sk, sh.Nkv, sh.D}, ld{sh.B, sh.Sq, sh.Nq, 1};
    const Buffer q = dev.alloc(qd, dtype, Layout::bsnd, "q"), k = dev.alloc(kd, dtype, Layout::bsnd, "k"),
                 v = dev.alloc(kd, dtype, Layout::bsnd, "v"), out = dev.alloc(qd, dtype, Layout::bsnd, "out"),
                 lse = dev.alloc(ld, dtype, Layout::bns, "lse");
    upload_values(dev, q, p.q);
    upload_values(dev, k, p.k);
    upload_values(dev, v, p.v);
    const AttentionOptions opt{.mask = p.mask, .scale = p.scale, .kind = {}};

    auto t0 = std::chrono::steady_clock::now();
    double c0 = thread_cpu_seconds();
    r.fwd_work = dev.attention_forward(q, p.q_pos, k, v, p.k_pos, out, lse, opt);
    dev.synchronize();
    r.fwd_seconds = seconds_since(t0);
    r.fwd_cpu_seconds = thread_cpu_seconds() - c0;
    r.fwd.out = download_values(dev, out);
    r.fwd.lse = download_values(dev, lse);

    if (backward) {
      const Buffer dout = dev.alloc(qd, dtype, Layout::bsnd, "dout"), dq = dev.alloc(qd, dtype, Layout::bsnd, "dq"),
                   dk = dev.alloc(kd, dtype, Layout::bsnd, "dk"), dv = dev.alloc(kd, dtype, Layout::bsnd, "dv");
      upload_values(dev, dout, p.dout);
      t0 = std::chrono::steady_clock::now();
      c0 = thread_cpu_seconds();
      r.bwd_work = dev.attention_backward(q, p.q_pos, k, v, p.k_pos, out, lse, dout, dq, dk, dv, opt);
      dev.synchronize();
      r.bwd_seconds = seconds_since(t0);
      r.bwd_cpu_seconds = thread_cpu_seconds() - c0;
      r.bwd.dq = download_values(dev, dq);
      r.bwd.dk = download_values(dev, dk);
      r.bwd.dv = download_values(dev, dv);
    }
    r.peak_bytes = dev.recorder().peak_bytes();
  }
  return r;
}

}  // namespace cpsim
