// The one Catch2 main of the unit tests. It fills storage left for a kernel to overwrite with
// NaN, so that a kernel reading its target before writing every element shows in the results.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <shaped/tensor/storage.hpp>

int main(int argc, char* argv[]) {
    shaped::detail::poison_unfilled_storage = true;
    return Catch::Session().run(argc, argv);
}
