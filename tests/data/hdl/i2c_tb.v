// An I2C master writing and reading an EEPROM-like slave, on a system clock (50 MHz): SCL and
// SDA are open-drain nets with pull-ups (a driver lets go with z), a 1 ps timescale, a hierarchy.
`timescale 1ns / 1ps

module i2c_master #(parameter Q = 6) (       // Q system clocks per quarter bit: 1.8 MHz SCL
    input  wire clk, rst_n, go,
    input  wire [7:0] addr, data,
    inout  wire scl, sda,
    output reg  busy
);
    reg scl_lo, sda_lo;                          // pull the line low, else let go (z)
    assign scl = scl_lo ? 1'b0 : 1'bz;
    assign sda = sda_lo ? 1'b0 : 1'bz;
    reg [5:0] q;                                 // quarter-bit counter
    reg [1:0] phase;
    reg [4:0] bitn;                              // bit of the transaction: 2 bytes of 9 bits
    reg [17:0] frame;
    reg [2:0] state;
    localparam IDLE = 0, START = 1, BITS = 2, STOP = 3, DONE = 4;
    always @(posedge clk or negedge rst_n) begin
        if (!rst_n) begin scl_lo <= 0; sda_lo <= 0; busy <= 0; state <= IDLE; q <= 0; phase <= 0; end
        else if (q != Q) q <= q + 1;
        else begin
            q <= 0;
            case (state)
            IDLE: if (go) begin busy <= 1; frame <= {addr, 1'b1, data, 1'b1}; bitn <= 0; state <= START; end
            START: begin sda_lo <= 1; phase <= phase + 1; if (phase == 1) begin scl_lo <= 1; phase <= 0; state <= BITS; end end
            BITS: begin
                case (phase)
                0: sda_lo <= ~frame[17];         // a 1 (and the acknowledge bit) lets SDA go
                1: scl_lo <= 0;
                2: ;
                3: begin scl_lo <= 1; frame <= {frame[16:0], 1'b0}; bitn <= bitn + 1; end
                endcase
                phase <= phase + 1;
                if (phase == 3 && bitn == 17) begin phase <= 0; state <= STOP; end
            end
            STOP: begin
                case (phase)
                0: sda_lo <= 1;
                1: scl_lo <= 0;
                2: sda_lo <= 0;
                3: begin busy <= 0; state <= DONE; end
                endcase
                phase <= phase + 1;
            end
            DONE: begin phase <= 0; state <= IDLE; end
            endcase
        end
    end
endmodule

module i2c_slave (input wire scl, inout wire sda);
    reg ack = 0;
    reg [3:0] n = 0;
    reg active = 0;
    assign sda = ack ? 1'b0 : 1'bz;
    always @(negedge sda) if (scl) begin active <= 1; n <= 0; end          // START
    always @(posedge sda) if (scl) active <= 0;                             // STOP
    always @(negedge scl) if (active) begin
        n <= (n == 8) ? 0 : n + 1;
        ack <= (n == 7);                          // pull SDA low through the 9th clock
    end
endmodule

module tb;
    reg clk = 0, rst_n = 0, go = 0;
    reg [7:0] addr, data;
    wire busy;
    tri1 scl, sda;                                // pull-ups
    always #10 clk = ~clk;
    i2c_master u_master (.clk(clk), .rst_n(rst_n), .go(go), .addr(addr), .data(data), .scl(scl), .sda(sda), .busy(busy));
    i2c_slave u_eeprom (.scl(scl), .sda(sda));
    integer i;
    initial begin
        $dumpfile("i2c_tb.vcd");
        $dumpvars(0, tb);
        #55 rst_n = 1;
        for (i = 0; i < 8; i = i + 1) begin
            #800;
            @(posedge clk) begin addr <= 8'hA0 | (i & 1); data <= 8'h10 + 3 * i; go <= 1; end
            wait (busy);
            @(posedge clk) go <= 0;
            wait (!busy);
        end
        #3000 $finish;
    end
endmodule
