#include "server/text/tokenizer.h"
