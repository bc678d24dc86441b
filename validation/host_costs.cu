// Host issue costs of the bare CUDA runtime calls the simulator charges, and
// the device-side gap between back-to-back kernels (in a stream and in a
// graph). Built and run by host_costs.py (nvcc -O2). Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

__global__ void empty() {}
__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}

static double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void quant(const char* name, std::vector<double> v, bool last = false) {
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[(size_t)(p * (v.size() - 1))]; };
  printf("\"%s\": {\"n\": %zu, \"median\": %.1f, \"p05\": %.1f, \"p95\": %.1f, \"min\": %.1f}%s\n", name, v.size(), q(0.5), q(0.05), q(0.95), v[0], last ? "" : ",");
}

int main() {
  cudaStream_t s, s2;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev, e0, e1;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 1000; i++) empty<<<1, 1, 0, s>>>();
  CK(cudaStreamSynchronize(s));
  const int B = 200, R = 50;
  std::vector<double> launch, launch_busy, rec, wait, sync_idle, graph1, graph100, dev_stream, dev_graph, roundtrip;
  // Bare launch, device idle at the start of each batch.
  for (int r = 0; r < R; r++) {
    double t0 = now_ns();
    for (int i = 0; i < B; i++) empty<<<1, 1, 0, s>>>();
    launch.push_back((now_ns() - t0) / B);
    CK(cudaStreamSynchronize(s));
  }
  // Launch while the device is busy (a spin kernel ahead): pure host cost.
  for (int r = 0; r < R; r++) {
    spin<<<1, 1, 0, s>>>(20000000);
    double t0 = now_ns();
    for (int i = 0; i < B; i++) empty<<<1, 1, 0, s>>>();
    launch_busy.push_back((now_ns() - t0) / B);
    CK(cudaStreamSynchronize(s));
  }
  for (int r = 0; r < R; r++) {
    double t0 = now_ns();
    for (int i = 0; i < B; i++) CK(cudaEventRecord(ev, s));
    rec.push_back((now_ns() - t0) / B);
    t0 = now_ns();
    for (int i = 0; i < B; i++) CK(cudaStreamWaitEvent(s2, ev, 0));
    wait.push_back((now_ns() - t0) / B);
    CK(cudaDeviceSynchronize());
  }
  for (int r = 0; r < R; r++) {
    double t0 = now_ns();
    CK(cudaStreamSynchronize(s));
    sync_idle.push_back(now_ns() - t0);
    t0 = now_ns();
    empty<<<1, 1, 0, s>>>();
    CK(cudaStreamSynchronize(s));
    roundtrip.push_back(now_ns() - t0);
  }
  // Device gap between back-to-back kernels queued behind a spin kernel.
  for (int r = 0; r < 20; r++) {
    spin<<<1, 1, 0, s>>>(5000000);
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < 1000; i++) empty<<<1, 1, 0, s>>>();
    CK(cudaEventRecord(e1, s));
    CK(cudaStreamSynchronize(s));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    dev_stream.push_back(ms * 1e6 / 1000);
  }
  // Graphs: one node, and a chain of 100 empty kernels.
  cudaGraph_t g1, g100;
  cudaGraphExec_t x1, x100;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  empty<<<1, 1, 0, s>>>();
  CK(cudaStreamEndCapture(s, &g1));
  CK(cudaGraphInstantiate(&x1, g1, 0));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 100; i++) empty<<<1, 1, 0, s>>>();
  CK(cudaStreamEndCapture(s, &g100));
  CK(cudaGraphInstantiate(&x100, g100, 0));
  for (int i = 0; i < 20; i++) { CK(cudaGraphLaunch(x1, s)); CK(cudaGraphLaunch(x100, s)); }
  CK(cudaStreamSynchronize(s));
  for (int r = 0; r < R; r++) {
    spin<<<1, 1, 0, s>>>(20000000);
    double t0 = now_ns();
    for (int i = 0; i < 50; i++) CK(cudaGraphLaunch(x1, s));
    graph1.push_back((now_ns() - t0) / 50);
    t0 = now_ns();
    for (int i = 0; i < 10; i++) CK(cudaGraphLaunch(x100, s));
    graph100.push_back((now_ns() - t0) / 10);
    CK(cudaStreamSynchronize(s));
  }
  for (int r = 0; r < 20; r++) {
    spin<<<1, 1, 0, s>>>(5000000);
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(x100, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaStreamSynchronize(s));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    dev_graph.push_back(ms * 1e6 / 100);
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("{\"driver_api\": %d, \"runtime\": %d,\n", drv, rt);
  quant("launch_ns", launch);
  quant("launch_device_busy_ns", launch_busy);
  quant("event_record_ns", rec);
  quant("stream_wait_event_ns", wait);
  quant("stream_sync_idle_ns", sync_idle);
  quant("launch_sync_roundtrip_ns", roundtrip);
  quant("device_gap_stream_ns", dev_stream);
  quant("graph_launch_1node_ns", graph1);
  quant("graph_launch_100node_ns", graph100);
  quant("device_gap_graph_ns", dev_graph, true);
  printf("}\n");
  return 0;
}
