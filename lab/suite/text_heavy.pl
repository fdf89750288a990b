#!/usr/bin/perl
# text_heavy.pl — an allocation-heavy Perl workload for the lab's default suite.
#
# usage: perl text_heavy.pl [rounds]
#
# Perl (Debian's build) allocates every scalar body, string buffer, array and hash through
# the C malloc, so this exercises the allocator under test the way text-processing scripts
# do: it generates a document of random words, tokenises it, counts words in a hash, builds
# and sorts records, rewrites strings with regular expressions and grows and shrinks arrays.
# Deterministic: its own linear congruential generator, the same output every run.
use strict;
use warnings;

my $rounds = @ARGV ? $ARGV[0] : 4;
my $seed = 12345;
sub rnd {    # uniform integer in [0, n)
    my ($n) = @_;
    $seed = ($seed * 1103515245 + 12345) % 2147483648;
    return int($seed / 2147483648 * $n);
}

my @letters = ('a' .. 'z');
sub word {
    my $len = 2 + rnd(10);
    return join '', map { $letters[rnd(26)] } 1 .. $len;
}

my $checksum = 0;
for my $round (1 .. $rounds) {
    # a document of lines of words
    my @vocabulary = map { word() } 1 .. 3000;
    my @lines;
    for (1 .. 12000) {
        push @lines, join ' ', map { $vocabulary[rnd(scalar @vocabulary)] } 1 .. (4 + rnd(12));
    }

    # word counts and a concordance of line numbers
    my (%count, %where);
    for my $i (0 .. $#lines) {
        for my $w (split / /, $lines[$i]) {
            $count{$w}++;
            push @{ $where{$w} }, $i if $count{$w} < 20;
        }
    }

    # records, sorted two ways
    my @records = map { { word => $_, n => $count{$_}, first => $where{$_}[0] } } keys %count;
    my @by_count = sort { $b->{n} <=> $a->{n} or $a->{word} cmp $b->{word} } @records;
    my @by_word = sort { $a->{word} cmp $b->{word} } @records;
    $checksum += $by_count[0]{n} + length($by_word[-1]{word});

    # rewriting: regexes build new strings
    for my $line (@lines) {
        (my $copy = $line) =~ s/\b(\w)(\w*)/\U$1\E$2/g;
        $copy =~ s/([aeiou])\1/$1/g;
        $checksum += length $copy;
    }

    # a queue that grows and shrinks
    my @queue;
    for my $i (1 .. 60000) {
        push @queue, [$i, word()];
        shift @queue if @queue > 500 && rnd(3) == 0;
        splice(@queue, 0, 100) if @queue > 5000;
    }
    $checksum += scalar @queue;
}
print "text_heavy: rounds=$rounds checksum=$checksum\n";
