#pragma once
// The threads OpenBLAS, and so shaped's own parallel loops, use while a threads_for_test lives:
// for tests that compare one thread's numbers with several threads'.

#include <cblas.h>

namespace ref {

class threads_for_test {
public:
    explicit threads_for_test(int n) : before_(openblas_get_num_threads()) { openblas_set_num_threads(n); }
    ~threads_for_test() { openblas_set_num_threads(before_); }
    threads_for_test(const threads_for_test&) = delete;
    threads_for_test& operator=(const threads_for_test&) = delete;

private:
    int before_;
};

}  // namespace ref
