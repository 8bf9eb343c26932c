#pragma once
// Values being differentiated, and the tape that records them. Inside train::value_and_grad
// (train/value_and_grad.hpp) the inputs of the user's loss are traced values; every expression
// that reads one is still built and evaluated as everywhere else, but eval() of it records it:
// the result is a traced value too, and the tape keeps the expression, with its operands saved
// (a traced operand by its handle, a parameter of the model by reference, any other tensor by a
// copy). The backward replays the tape from the end, each record handing its gradient to its
// operands by the derivatives of train/derivatives.hpp, derived from the expression's type.
//
//   traced<T, Ds...>       a (Ds...) value on the tape: an Expression, read in place like a View
//   eval(e)                of an expression reading a traced value: a traced value, recorded
//   tape                   what one value_and_grad records; its parameters, found by address

#include <shaped/tensor.hpp>

#include <cstddef>
#include <memory>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shaped::train {

class tape;

namespace detail {

// One value on a tape: its gradient, once anything adds to it, and how to hand it on.
struct recorded_base {
    virtual ~recorded_base() = default;
    // Adds the gradients of this value's operands, from this value's own.
    virtual void backward() = 0;
};

template <class T, Dim... Ds>
struct recorded_value : recorded_base {
    explicit recorded_value(Tensor<T, Ds...> v) : value(std::move(v)) {}
    void backward() override {}  // an input: its operands are none

    Tensor<T, Ds...> value;
    Tensor<T, Ds...> gradient;  // allocated when first added to
    bool has_gradient = false;
};

// The tape of this thread's value_and_grad, if one runs, and whether recording is paused (while
// the kernels evaluate a recorded expression, and while the backward runs).
inline thread_local tape* active_tape = nullptr;

// An expression that reads a Tensor held elsewhere (Derived::stored()), in place, as a View
// does: what a traced value and the leaves a record saves have in common.
template <class Derived, class T, Dim... Ds>
class reads_tensor : public expression_base {
public:
    using value_type = T;
    using dims_type = dims<Ds...>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = sizeof...(Ds);

    const T* data() const { return stored().data(); }
    auto extents() const { return stored().extents(); }
    auto strides() const { return stored().strides(); }
    std::size_t size() const { return stored().size(); }
    static constexpr bool is_contiguous() { return true; }

private:
    const Tensor<T, Ds...>& stored() const { return static_cast<const Derived&>(*this).stored(); }
};

}  // namespace detail

// A value being differentiated: the value, and its record. Copies share the record.
template <class T, Dim... Ds>
class traced : public detail::reads_tensor<traced<T, Ds...>, T, Ds...> {
public:
    using tensor_type = Tensor<T, Ds...>;

    explicit traced(std::shared_ptr<detail::recorded_value<T, Ds...>> record) : record_(std::move(record)) {}

    const tensor_type& value() const { return record_->value; }
    const tensor_type& stored() const { return record_->value; }
    template <class... I>
    T operator()(I... i) const { return value()(i...); }
    T item() const { return value().item(); }
    // The last two dims swapped, as Tensor::mT.
    auto mT() const { return shaped::mT(*this); }

    // The gradient added so far (zeros if none).
    tensor_type gradient() const {
        if (record_->has_gradient) return record_->gradient;
        tensor_type zeros{typename tensor_type::shape_type(this->extents())};
        zeros.fill(T(0));
        return zeros;
    }
    detail::recorded_value<T, Ds...>& record() const { return *record_; }
    const std::shared_ptr<detail::recorded_value<T, Ds...>>& handle() const { return record_; }

private:
    std::shared_ptr<detail::recorded_value<T, Ds...>> record_;
};

template <class E>
inline constexpr bool is_traced = false;
template <class T, Dim... Ds>
inline constexpr bool is_traced<traced<T, Ds...>> = true;

// What one value_and_grad records, in order, and the parameters whose gradients it wants.
class tape {
public:
    tape() : outer_(detail::active_tape) { detail::active_tape = this; }
    ~tape() { detail::active_tape = outer_; }
    tape(const tape&) = delete;
    tape& operator=(const tape&) = delete;

    static tape* active() { return detail::active_tape; }

    // The gradient of a parameter, added to when the backward reaches it.
    template <class T, Dim... Ds>
    void watch(const Tensor<T, Ds...>& parameter, Tensor<T, Ds...>& gradient) {
        parameters_.insert_or_assign(parameter.data(),
                                     parameter_gradient{std::type_index(typeid(Tensor<T, Ds...>)), &gradient});
    }
    // The gradient a parameter has on this tape, or null where the tensor is not one.
    template <class T, Dim... Ds>
    Tensor<T, Ds...>* gradient_of(const Tensor<T, Ds...>& tensor) const {
        const auto found = parameters_.find(tensor.data());
        if (found == parameters_.end() || found->second.type != std::type_index(typeid(Tensor<T, Ds...>))) return nullptr;
        return static_cast<Tensor<T, Ds...>*>(found->second.gradient);
    }

    // A value read from outside (an input of the loss): on the tape, with no operands.
    template <class T, Dim... Ds>
    traced<T, Ds...> input(Tensor<T, Ds...> value) {
        auto record = std::make_shared<detail::recorded_value<T, Ds...>>(std::move(value));
        records_.push_back(record);
        return traced<T, Ds...>(std::move(record));
    }
    void push(std::shared_ptr<detail::recorded_base> record) { records_.push_back(std::move(record)); }

    // Whether eval() records now: not while the kernels evaluate a recorded expression's parts.
    bool recording() const { return !paused_; }

    // From the end of the tape back: each record hands its gradient to its operands.
    void backward() {
        const pause during(*this);
        for (auto at = records_.rbegin(); at != records_.rend(); ++at) (*at)->backward();
    }

    // Pauses recording for its lifetime.
    class pause {
    public:
        explicit pause(tape& t) : tape_(t), was_(t.paused_) { t.paused_ = true; }
        ~pause() { tape_.paused_ = was_; }
        pause(const pause&) = delete;
        pause& operator=(const pause&) = delete;

    private:
        tape& tape_;
        bool was_;
    };

private:
    struct parameter_gradient {
        std::type_index type;
        void* gradient;
    };
    tape* outer_;
    bool paused_ = false;
    std::vector<std::shared_ptr<detail::recorded_base>> records_;
    std::unordered_map<const void*, parameter_gradient> parameters_;
};

}  // namespace shaped::train
