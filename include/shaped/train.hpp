#pragma once
// Training: gradients typed as their parameters and derived from the forward, AdamW, the
// learning-rate schedule, and a language model's training step.
#include <shaped/train/diagnostics.hpp>
#include <shaped/train/derivatives.hpp>
#include <shaped/train/value_and_grad.hpp>
#include <shaped/train/gradients.hpp>
#include <shaped/train/adamw.hpp>
#include <shaped/train/schedule.hpp>
#include <shaped/train/step.hpp>
