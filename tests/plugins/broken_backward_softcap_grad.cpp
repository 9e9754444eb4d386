// The naive subject with a broken backward under a softcap: the score's
// gradient left without the factor 1 - tanh^2(x / c), as if the cap were absent.
#define NAIVE_BACKWARD_SOFTCAP_GRAD(th) ((void)(th), 1.0f)
#include "naive/naive_subject.cpp"
