// shaped-train's training of the gpt-char preset (presets.hpp), compiled beside the others.
#include "../training.hpp"

template int shaped_train::train<shaped_train::gpt_char>(const shaped_train::options&, const shaped_train::processes&);
