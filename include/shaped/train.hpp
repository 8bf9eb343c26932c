#pragma once
// Training: gradients typed as their parameters, the layers' backward passes, AdamW, the
// learning-rate schedule, and the GPT's training step.
#include <shaped/train/diagnostics.hpp>
#include <shaped/train/gradients.hpp>
#include <shaped/train/layers.hpp>
#include <shaped/train/adamw.hpp>
#include <shaped/train/schedule.hpp>
#include <shaped/train/step.hpp>
#include <shaped/train/value_and_grad.hpp>
#include <shaped/train/gpt.hpp>
#include <shaped/train/llama.hpp>
