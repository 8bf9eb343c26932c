#pragma once
// Training: gradients typed as their parameters and derived from the forward, layers recomputed
// in the backward instead of kept, AdamW, the learning-rate schedule, and a language model's
// training step.
#include <shaped/train/diagnostics.hpp>
#include <shaped/train/derivatives.hpp>
#include <shaped/train/value_and_grad.hpp>
#include <shaped/train/recomputed.hpp>
#include <shaped/train/gradients.hpp>
#include <shaped/train/adamw.hpp>
#include <shaped/train/schedule.hpp>
#include <shaped/train/step.hpp>
