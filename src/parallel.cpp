// A small persistent thread pool for shaped's parallel loops. Workers sleep on a condition
// variable between loops (no spinning that would take a core from OpenBLAS's own threads).
#include <shaped/kernels/parallel.hpp>

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace shaped::kernels {

namespace {

thread_local bool inside_task = false;

class pool {
public:
    explicit pool(std::size_t workers) {
        threads_.reserve(workers);
        for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this, i] { work(i); });
    }

    ~pool() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto& t : threads_) t.join();
    }

    std::size_t workers() const { return threads_.size(); }

    // Runs one loop with `helpers` workers beside the caller; false when another thread's loop
    // holds the pool.
    bool run(std::size_t n, std::size_t helpers, void (*task)(void*, std::size_t), void* context) {
        std::unique_lock busy(busy_, std::try_to_lock);
        if (!busy.owns_lock()) return false;
        {
            std::lock_guard lock(mutex_);
            task_ = task;
            context_ = context;
            size_ = n;
            helpers_ = helpers;
            next_.store(0, std::memory_order_relaxed);
            running_ = threads_.size();
            ++generation_;
        }
        wake_.notify_all();
        take_tasks(task, context, n);
        std::unique_lock lock(mutex_);
        done_.wait(lock, [this] { return running_ == 0; });
        return true;
    }

private:
    void take_tasks(void (*task)(void*, std::size_t), void* context, std::size_t n) {
        inside_task = true;
        for (std::size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n;) task(context, i);
        inside_task = false;
    }

    void work(std::size_t index) {
        std::size_t seen = 0;
        for (;;) {
            void (*task)(void*, std::size_t);
            void* context;
            std::size_t n;
            bool helps;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
                if (stopping_) return;
                seen = generation_;
                task = task_;
                context = context_;
                n = size_;
                helps = index < helpers_;
            }
            if (helps) take_tasks(task, context, n);
            {
                std::lock_guard lock(mutex_);
                if (--running_ == 0) done_.notify_one();
            }
        }
    }

    std::vector<std::thread> threads_;
    std::mutex busy_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    void (*task_)(void*, std::size_t) = nullptr;
    void* context_ = nullptr;
    std::size_t size_ = 0;
    std::size_t helpers_ = 0;
    std::atomic<std::size_t> next_{0};
    std::size_t running_ = 0;
    std::size_t generation_ = 0;
    bool stopping_ = false;
};

// The pool, made on the first loop that needs more than one thread, with a worker per core
// (or per thread asked for, if more); each loop wakes only as many as it uses.
pool& shared_pool(std::size_t threads) {
    static pool workers(std::max<std::size_t>(threads, std::thread::hardware_concurrency()) - 1);
    return workers;
}

}  // namespace

std::size_t thread_count() { return static_cast<std::size_t>(std::max(1, openblas_get_num_threads())); }

void parallel_for(std::size_t n, void (*task)(void*, std::size_t), void* context) {
    const std::size_t threads = std::min(thread_count(), n);
    if (threads > 1 && !inside_task) {
        pool& workers = shared_pool(threads);
        if (workers.run(n, std::min(threads - 1, workers.workers()), task, context)) return;
    }
    for (std::size_t i = 0; i < n; ++i) task(context, i);
}

}  // namespace shaped::kernels
