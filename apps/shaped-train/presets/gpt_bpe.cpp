// shaped-train's training of the gpt-bpe preset (presets.hpp), compiled beside the others.
#include "../training.hpp"

template int shaped_train::train<shaped_train::gpt_bpe>(const shaped_train::options&, const shaped_train::processes&);
